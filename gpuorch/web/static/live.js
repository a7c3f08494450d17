// gpuorch dashboard: the page's content refreshed in place (docs/dashboard.md, "Live updates").
// The one script of the dashboard, served from /ui/static (the CSP allows no inline script).
// Every data-refresh seconds it fetches the same address and swaps the new <main> in: no reload,
// no flicker, the scroll of tables and of the log kept. It waits while the tab is hidden, while a
// confirmation is open, while a form is in use or filled in, and while text is selected; the
// header's button pauses it for good. Without this script the pages work as before, unrefreshed.
(function () {
  "use strict";
  var every = parseFloat(document.body.getAttribute("data-refresh") || "0");
  var status = document.getElementById("live-status");
  var toggle = document.getElementById("live-toggle");
  if (!(every > 0) || !status || !toggle) return;
  var held = false, ended = false, busy = false, timer = null;
  var here = new URL(window.location.href);
  if (here.searchParams.has("done")) {  // an action's notice is for this view; a refresh drops it
    here.searchParams.delete("done");
    window.history.replaceState(null, "", here.toString());
  }

  function say(text) { status.textContent = text; }

  function reading() {
    var main = document.querySelector("main");
    if (!main) return "no page";
    if (main.querySelector("details.action[open]")) return "a confirmation is open";
    var active = document.activeElement;
    if (active && active.form && main.contains(active)) return "a form is in use";
    var fields = main.querySelectorAll("input:not([type=hidden]), textarea, select");
    for (var i = 0; i < fields.length; i++) {
      if (fields[i].value !== fields[i].defaultValue) return "a form is filled in";
    }
    var sel = window.getSelection();
    if (sel && !sel.isCollapsed && String(sel).length > 0) return "text is selected";
    return null;
  }

  function swap(html) {
    var fresh = new DOMParser().parseFromString(html, "text/html");
    var next = fresh.querySelector("main"), main = document.querySelector("main");
    if (!next || !main) return;
    var boxes = main.querySelectorAll(".scroll, pre.log");
    var kept = [];
    for (var i = 0; i < boxes.length; i++) kept.push([boxes[i].scrollLeft, boxes[i].scrollTop]);
    main.replaceWith(document.adoptNode(next));
    var now = document.querySelector("main").querySelectorAll(".scroll, pre.log");
    for (var j = 0; j < now.length && j < kept.length; j++) {
      now[j].scrollLeft = kept[j][0];
      now[j].scrollTop = kept[j][1];
    }
    document.title = fresh.title;
  }

  function tick() {
    if (held || ended || busy) return;
    if (document.hidden) return later();
    var why = reading();
    if (why) { say("paused: " + why); return later(); }
    busy = true;
    window.fetch(window.location.href, {credentials: "same-origin", cache: "no-store"}).then(function (r) {
      if (r.redirected && new URL(r.url).pathname === "/ui/login") {
        ended = true;
        say("session ended: reload the page to log in");
        return null;
      }
      if (!r.ok) { say("refresh failed: HTTP " + r.status); return null; }
      return r.text();
    }).then(function (html) {
      if (html === null) return;
      var why = reading();  // the user may have started something while it loaded
      if (why) { say("paused: " + why); return; }
      swap(html);
      say("updated " + new Date().toLocaleTimeString());
    }).catch(function () {
      say("refresh failed: the server did not answer");
    }).then(function () { busy = false; later(); });
  }

  function later() {  // one timer at a time
    window.clearTimeout(timer);
    if (!held && !ended) timer = window.setTimeout(tick, every * 1000);
  }

  toggle.hidden = false;
  toggle.addEventListener("click", function () {
    held = !held;
    window.clearTimeout(timer);
    toggle.textContent = held ? "resume" : "pause";
    say(held ? "paused" : "live");
    if (!held) tick();
  });
  say("live, every " + every + " s");
  later();
})();
