"""Doctor checks of the providers: installed adapters (entry points importable), the enabled
ones loadable with their options, and each one's own self-check (credentials through its SDK's
standard chain), found by the ``doctor()`` capability, never by provider name."""

from __future__ import annotations

from collections.abc import Iterator
from importlib.metadata import entry_points

from gpuorch.doctor.context import Context
from gpuorch.doctor.findings import Finding
from gpuorch.errors import UserInputError
from gpuorch.provider.port import (
    Provider,
    SupportsDoctor,
    SupportsPreemptionInjection,
    SupportsPriceRefresh,
    SupportsVolumes,
)
from gpuorch.registry import GROUP


def check_providers(ctx: Context) -> Iterator[Finding]:
    if ctx.config is None:
        return
    enabled = ctx.config.providers
    eps = {ep.name: ep for ep in entry_points(group=GROUP)}
    for name, ep in sorted(eps.items()):
        try:
            ep.load()
        except Exception as e:  # ImportError mostly; anything else is as broken
            if name in enabled:
                yield Finding.fail(f"provider {name}",
                                   f"enabled, but its adapter cannot be imported ({type(e).__name__}: {e})",
                                   f"pip install 'gpuorch[{name}]' into the daemon's environment")
            else:
                yield Finding.warn(f"provider {name}", f"installed, not enabled, not importable ({type(e).__name__})",
                                   f"pip install 'gpuorch[{name}]', or uninstall the adapter")
            continue
        if name not in enabled:
            yield Finding.ok(f"provider {name}", "installed, not enabled")
    for name, options in enabled.items():
        if name not in eps:
            installed = ", ".join(sorted(eps)) or "none"
            yield Finding.fail(f"provider {name}", f"enabled, but no adapter is installed (installed: {installed})",
                               f"pip install 'gpuorch[{name}]', or remove providers.{name} from the config")
            continue
        try:
            ctx.providers[name] = eps[name].load().from_config(options or {}, ctx.config.home)
        except UserInputError as e:
            yield Finding.fail(f"provider {name}", str(e), f"correct providers.{name} in the config")
        except Exception as e:  # an adapter that cannot even start
            yield Finding.fail(f"provider {name}", f"cannot be set up: {type(e).__name__}: {e}",
                               f"check providers.{name} in the config and the adapter's installation")
        else:
            yield Finding.ok(f"provider {name}", f"enabled and loaded; {capabilities(ctx.providers[name])}")


def capabilities(provider: Provider) -> str:
    """What this adapter can do, read off its capabilities (never its name): the doctor says it
    so that a missing feature (volumes, containers, several nodes) is not a surprise later."""
    has = [label for label, cap in (("volumes", SupportsVolumes), ("live price refresh", SupportsPriceRefresh),
                                    ("simulated reclaims (debug preempt)", SupportsPreemptionInjection),
                                    ("self-check", SupportsDoctor)) if isinstance(provider, cap)]
    declared = provider.capabilities
    if declared.volumes_at_launch:
        has.insert(0, "volumes (given at launch)")
    if declared.runs_containers:
        has.append("container images")
    if declared.max_nodes > 1:
        has.append(f"up to {declared.max_nodes} nodes per job")
    return "capabilities: " + (", ".join(has) or "none beyond the port")


def check_credentials(ctx: Context) -> Iterator[Finding]:
    for name, provider in ctx.providers.items():
        if not isinstance(provider, SupportsDoctor):
            yield Finding.warn(f"provider {name}", "the adapter has no self-check: credentials not verified",
                               "upgrade the adapter; meanwhile watch the daemon's log for auth errors")
            continue
        try:
            found = list(provider.doctor())
        except Exception as e:  # a self-check must not take the doctor down
            yield Finding.fail(f"provider {name}", f"its self-check raised {type(e).__name__}",
                               "report this to the adapter's maintainers; run the daemon with -v for details")
            continue
        yield from found or [Finding.ok(f"provider {name}", "self-check passed")]
