"""What a reload (SIGHUP) may change, decided before anything running is touched.

A reload re-reads every file. What cannot change while mirrord runs (the flow's identity, its state,
its clusters, Spark's own settings: config.fixed_changes) refuses it whole, and the running
configuration goes on; so does an invalid file, a transform Spark cannot run, or a change that would
restart the query while a cluster is away. Otherwise the new settings apply, restarting the query
only when its definition changed (Flow.query_differs), as a stop does: nothing copied twice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mirrord.errors import MirrordError
from mirrord.settings.config import Settings, fixed_changes
from mirrord.settings.flow import Flow


@dataclass(frozen=True)
class Reload:
    settings: Settings
    flow: Flow
    restart: bool  # the streaming query must restart


def prepare(running: Settings, running_flow: Flow, load: Callable[[], Settings], away: list[str],
            check_transforms: Callable[[Flow], None]) -> Reload:
    """The reload to apply; raises MirrordError (one line) when it is refused. `away` names the clusters
    that do not answer now."""
    settings = load()
    refused = fixed_changes(running, settings)
    if refused:
        raise MirrordError(f"{', '.join(refused)} cannot change while mirrord runs (restart it to change "
                           f"{'them' if len(refused) > 1 else 'it'})")
    flow = Flow.from_settings(settings)
    restart = running_flow.query_differs(flow)
    if restart and away:
        raise MirrordError(f"not during an outage ({'; '.join(away)})")
    check_transforms(flow)
    return Reload(settings, flow, restart)
