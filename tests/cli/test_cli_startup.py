"""The console script's start-up (issue 32): the garbage collector stays off only for the short
read-only commands, the configuration of a host with nothing configured is read without YAML, and
``offers`` reads the local adapter's offers without importing its provider module."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpuorch.cli import NO_GC, command_name


def _console(*args: str, home: Path) -> tuple[dict[str, object], str]:
    code = ("import gc, json, sys; sys.argv = ['gpuorch', *sys.argv[1:]]\n"
            "from gpuorch.console import main\n"
            "try:\n    main()\n"
            "except SystemExit as e:\n    code = e.code\n"
            "else:\n    code = 0\n"
            "print(json.dumps({'code': code, 'gc': gc.isenabled(), 'yaml': 'yaml' in sys.modules,\n"
            "                  'provider': 'gpuorch_local.provider' in sys.modules}))")
    p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                       env={"GPUORCH_HOME": str(home), "PATH": "/usr/bin:/bin", "HOME": str(home),
                            "XDG_CONFIG_HOME": str(home / "xdg"), "CONFIGURATION_DIRECTORY": str(home / "etc")})
    return json.loads(p.stdout.strip().splitlines()[-1]), p.stdout


@pytest.mark.parametrize("args, gc_on", [(["offers", "--json"], False), (["catalog", "--help"], True),
                                         (["--help"], True)])
def test_the_collector_is_back_on_for_every_command_but_the_short_ones(tmp_path, args, gc_on):
    got, out = _console(*args, home=tmp_path)
    assert got["code"] == 0, out
    assert got["gc"] is gc_on
    if args[0] == "offers":
        assert '"source": "the configured providers (local)"' in out
        assert got["yaml"] is False  # nothing configured: no YAML read
        assert got["provider"] is False  # the catalog's offers (AdapterCatalog.offers), not the class


def test_the_short_commands_are_read_only_ones():
    assert NO_GC.issubset({"offers", "status", "estimate", "plan"})
    assert command_name(["--config", "c.yaml", "status", "--json"]) == "status"
    assert command_name(["--server=http://h", "daemon"]) == "daemon"
    assert command_name(["--version"]) is None


def test_a_catalogs_offers_are_its_provider_classes(tmp_path):
    """``AdapterCatalog.offers`` is what ``registry.offline_offers`` calls instead of the class's
    ``catalog_offers``: both give the same offers."""
    from gpuorch.catalog.registry import catalogs
    from gpuorch.registry import available, catalog_offers, offline_offers, provider_class

    declared = [name for name, c in catalogs().items() if c.offers is not None and name in available()]
    assert "local" in declared
    for name in declared:
        hook = catalog_offers(name)
        assert hook != provider_class(name).catalog_offers
        offers = hook({}, tmp_path)
        assert offers == provider_class(name).catalog_offers({}, tmp_path) == offline_offers({name: {}}, tmp_path)


def test_an_unknown_provider_is_named_before_any_catalog_is_read(tmp_path):
    from gpuorch.errors import UserInputError
    from gpuorch.registry import offline_offers

    with pytest.raises(UserInputError, match=r"providers\.nosuch: unknown provider"):
        offline_offers({"nosuch": {}}, tmp_path)


def test_a_shipped_adapter_is_found_without_scanning_every_distribution(monkeypatch, tmp_path):
    from gpuorch import registry

    def no_scan() -> None:
        raise AssertionError("scanned every installed distribution")

    for cached in (registry._shipped, registry._groups):
        cached.cache_clear()
    monkeypatch.setattr(registry, "entry_points", no_scan)
    try:
        assert registry.provider_class("local").name == "local"
        assert registry.offline_offers({"local": {}}, tmp_path)
    finally:
        monkeypatch.undo()
        for cached in (registry._shipped, registry._groups):
            cached.cache_clear()
    assert set(registry._shipped()["gpuorch.providers"]) <= set(registry.available())
