"""Prefect flow over the DVC pipeline: one task per DVC stage item, one MLflow parent run.

DVC owns the DAG and caching; this flow owns running, fan-out and scheduling. Each stage item
(`synthesize`, …, `train@slca-0`, `train@grpo-0`, …) is one Prefect task: `dvc status` first (an
unchanged item is skipped, so a rerun resumes where a failure stopped), then `dvc repro
--single-item <item>`. Items of a matrix stage run `pipeline.max_parallel_items` at a time: above
1 their commands run side by side and each is recorded with `dvc commit` (`slca.orchestration`);
with `pipeline.item_deployment` they run on a work pool's workers (the `slca-item` flow below, the
`items` deployment of prefect.yaml), each in its own checkout, sharing the DVC remote; an item
whose worker stops sending heartbeats is marked Crashed and retried once on another worker.
The MLflow parent run id reaches every stage process through `SLCA_PARENT_RUN_ID`, so each
stage's run nests under it. At the end the comparison table becomes a Prefect markdown artifact
and an artifact of the parent run, and `dvc push` sends the outputs to the default remote.

    python flows/pipeline.py                   # ephemeral Prefect, or PREFECT_API_URL's server
    python flows/pipeline.py --stages synthesize calibrate
    python flows/pipeline.py --serve           # long-running deployment with a schedule
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import json
import os
import re
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NONE
from prefect.futures import as_completed

from slca import orchestration
from slca.config import ParamsError, PipelineParams, load_params
from slca.orchestration import ServerUnreachable, StageFailed
from slca.tracking import (
    ITEM_FLOW_RUN_ENV,
    PARENT_ENV,
    TrackingError,
    check_reachable,
    kill_item_runs,
    pipeline_run,
    resolve_tracking_uri,
)

COMPARISON = Path("reports/comparison.md")


def dvc_stages() -> list[str]:
    """Top-level stage names of dvc.yaml, in DAG order."""
    return list(orchestration.stage_items())


LOCK_ARTIFACT = "dvc-lock-entry"


def _artifact_key(item: str) -> str:
    return LOCK_ARTIFACT + "-" + re.sub(r"[^a-z0-9-]+", "-", item.lower())


HEARTBEAT_EVENT = "slca.item.heartbeat"


@contextlib.contextmanager
def _heartbeats(flow_run_id: str, every_s: float) -> Iterator[None]:
    """Send a heartbeat event about this flow run every `every_s` seconds until the block ends.

    A daemon thread, so a CPU-bound stage does not delay it; it sees this context's settings (the API URL).
    """
    from prefect.events import emit_event

    resource = {"prefect.resource.id": f"prefect.flow-run.{flow_run_id}"}
    stop = threading.Event()

    def beat() -> None:
        while True:
            with contextlib.suppress(Exception):  # a missed beat is what the flow side watches for
                emit_event(event=HEARTBEAT_EVENT, resource=resource)
            if stop.wait(every_s):
                return

    thread = threading.Thread(target=contextvars.copy_context().run, args=(beat,), daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)


@flow(name="slca-item", log_prints=True)
def slca_item(
    item: str,
    lock_text: str,
    params_text: str,
    force: bool = False,
    head: str | None = None,
    tracking_uri: str | None = None,
    parent_run_id: str | None = None,
    heartbeat_s: float = 30.0,
) -> dict:
    """One stage item on a work pool's worker, in its own checkout; its dvc.lock entry becomes an artifact."""
    from prefect.runtime import flow_run

    if tracking_uri:
        os.environ["MLFLOW_TRACKING_URI"] = tracking_uri
    if parent_run_id:
        os.environ[PARENT_ENV] = parent_run_id
    os.environ[ITEM_FLOW_RUN_ENV] = str(flow_run.id)  # tags the stage's MLflow run
    logger = get_run_logger()
    with _heartbeats(str(flow_run.id), heartbeat_s):
        entry = orchestration.run_item_in_workspace(item, lock_text, params_text, logger.info, force=force, head=head)
    create_markdown_artifact(
        key=_artifact_key(item),
        markdown="```json\n" + json.dumps(entry, indent=1) + "\n```",
        description=f"dvc.lock entry of {item}, run in {os.getcwd()}",
    )
    return entry


def _lock_entry_of(flow_run_id: Any, item: str) -> dict:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterKey,
        FlowRunFilter,
        FlowRunFilterId,
    )

    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[_artifact_key(item)])),
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])),
        )
    if not found:
        raise StageFailed(f"stage {item!r}: the worker's run left no dvc.lock entry")
    text = str(found[0].data)
    return json.loads(text[text.index("{") : text.rindex("}") + 1])


def _last_heartbeat(client: Any, flow_run_id: Any) -> str | None:
    """Id of the newest heartbeat event the server holds for this flow run (None before the first)."""
    from prefect.events.filters import EventFilter, EventNameFilter, EventResourceFilter

    page = client.read_events(
        EventFilter(
            event=EventNameFilter(name=[HEARTBEAT_EVENT]),
            resource=EventResourceFilter(id=[f"prefect.flow-run.{flow_run_id}"]),
        ),
        limit=1,
    )
    return str(page.events[0].id) if page.events else None


def _watch(item: str, flow_run: Any, lost_after_s: float, poll_s: float = 2.0) -> Any:
    """Wait for an item's flow run to end; a run that stops sending heartbeats is lost.

    Silence is measured on this side's clock (from the run being claimed, then from each new beat),
    so clocks of other machines do not matter. A lost run is marked Crashed, its open MLflow runs are
    marked KILLED, and the item fails in one line (the task's retry sends it to the pool again).
    """
    from prefect.client.orchestration import get_client
    from prefect.states import Crashed

    seen, since = None, None
    with get_client(sync_client=True) as client:
        while True:
            run = client.read_flow_run(flow_run.id)
            if run.state is not None and run.state.is_final():
                return run
            if run.state is not None and (run.state.is_running() or run.state.is_pending()):
                beat = _last_heartbeat(client, flow_run.id)
                if since is None or beat != seen:
                    seen, since = beat, time.monotonic()
                silent = time.monotonic() - since
                if silent > lost_after_s:
                    why = f"its worker sent no heartbeat for {silent:.0f} s"
                    client.set_flow_run_state(flow_run.id, Crashed(message=why), force=True)
                    killed = kill_item_runs(str(flow_run.id))
                    raise StageFailed(
                        f"stage {item!r} lost on a worker (flow run {run.name}): {why}; marked "
                        f"Crashed" + (f", {len(killed)} MLflow run(s) KILLED" if killed else "")
                    )
            time.sleep(poll_s)


def _on_worker(item: str, deployment: str, force: bool, heartbeat_s: float, lost_after_s: float, logger: Any) -> None:
    """Send one item to the `items` deployment, wait for it, then adopt its outputs and lock entry."""
    from prefect.deployments import run_deployment

    lock = Path("dvc.lock")
    parameters = {
        "item": item,
        "lock_text": lock.read_text(encoding="utf-8") if lock.exists() else "",
        "params_text": Path("params.yaml").read_text(encoding="utf-8"),
        "force": force,
        "head": orchestration.git_head(),
        "tracking_uri": os.environ.get("MLFLOW_TRACKING_URI"),
        "parent_run_id": os.environ.get(PARENT_ENV),
        "heartbeat_s": heartbeat_s,
    }
    logger.info("%s: sent to deployment %s", item, deployment)
    created = run_deployment(name=deployment, parameters=parameters, timeout=0)  # returns once created
    done = _watch(item, created, lost_after_s)
    if not done.state or not done.state.is_completed():
        message = (done.state.message if done.state else "") or "no state"
        message = message.split("Flow run encountered an exception: ", 1)[-1].removeprefix("StageFailed: ")
        raise StageFailed(f"stage {item!r} failed on a worker (flow run {done.name}): {message.splitlines()[0]}")
    orchestration.adopt_item(item, _lock_entry_of(done.id, item))
    logger.info("%s: ran on a worker (flow run %s); outputs pulled and committed", item, done.name)


# No Prefect result caching: DVC decides what is up to date.
@task(retries=1, retry_delay_seconds=5, task_run_name="{item}", cache_policy=NONE)
def run_stage_item(
    item: str, force: bool = False, beside_others: bool = False, workers: PipelineParams | None = None
) -> bool:
    """Bring one stage item up to date; True when it ran, False when DVC found it unchanged."""
    logger = get_run_logger()
    if not force and orchestration.is_up_to_date(item):
        logger.info("%s is up to date; skipped", item)
        return False
    if workers is not None:  # to the work pool, watched by heartbeat
        _on_worker(item, workers.item_deployment, force, workers.item_heartbeat_s, workers.item_lost_after_s, logger)
    elif beside_others:
        orchestration.run_item_command(item, logger.info)
        orchestration.commit_item(item)
    else:
        orchestration.repro_item(item, logger.info, force=force)
    return True


def _fan_out(items: list[str], limit: int, force: bool, workers: PipelineParams | None = None) -> list[str]:
    """Run independent items `limit` at a time; returns those that ran. The first failure ends it."""
    if workers is not None:  # the workers need every input the flow has produced so far
        orchestration.push()
    waiting, running, ran = list(items), {}, []
    while waiting or running:
        while waiting and len(running) < limit:
            item = waiting.pop(0)
            running[run_stage_item.submit(item, force=force, beside_others=True, workers=workers)] = item
        finished = next(as_completed(list(running)))
        item = running.pop(finished)
        if finished.result():
            ran.append(item)
    return [item for item in items if item in ran]


def _publish_comparison(parent_run_id: str) -> None:
    """The comparison table as a markdown artifact of this flow run and an artifact of the MLflow parent run."""
    if not COMPARISON.exists():
        return
    import mlflow

    create_markdown_artifact(
        markdown=COMPARISON.read_text(encoding="utf-8"),
        key="slca-comparison",
        description="reports/comparison.md: every estimator, mean ± std over seeds",
    )
    mlflow.MlflowClient().log_artifact(parent_run_id, str(COMPARISON), "comparison")


def _push(logger) -> None:
    remote = orchestration.default_remote()
    if remote is None:
        logger.warning("pipeline.push is on but no default DVC remote is set (`dvc remote add -d`); not pushed")
        return
    logger.info("dvc push to %s: %s", remote, orchestration.push())


@flow(name="slca-pipeline", log_prints=True)
def slca_pipeline(params_path: str = "params.yaml", stages: list[str] | None = None, force: bool = False) -> list[str]:
    """Run the DVC stage items in order under one MLflow parent run; returns the items that ran."""
    params = load_params(params_path)
    limit, deployment = params.pipeline.max_parallel_items, params.pipeline.item_deployment
    groups = orchestration.expand(stages, orchestration.stage_items())
    if deployment:
        orchestration.check_shared_tracking(resolve_tracking_uri(params.project.tracking_uri))
        if orchestration.default_remote() is None:
            raise StageFailed("pipeline.item_deployment needs a DVC remote the workers share (`dvc remote add -d`)")
    ran: list[str] = []
    with pipeline_run(params, name="pipeline") as parent:
        print(f"MLflow parent run {parent.info.run_id}")
        for items in groups:
            if deployment and len(items) > 1:  # a matrix stage: its items go to the work pool's workers
                ran += _fan_out(items, limit, force, params.pipeline)
            elif limit > 1 and len(items) > 1:
                ran += _fan_out(items, limit, force)
            else:
                ran += [item for item in items if run_stage_item(item, force=force)]
        skipped = [item for items in groups for item in items if item not in ran]
        print(f"stages run: {', '.join(ran) or 'none'}; skipped (up to date): {', '.join(skipped) or 'none'}")
        _publish_comparison(parent.info.run_id)
        if params.pipeline.push:
            _push(get_run_logger())
    return ran


def preflight(params_path: str) -> None:
    """Fail in seconds, naming the URL, when the Prefect API or the MLflow server does not answer."""
    from prefect.settings import PREFECT_API_URL

    orchestration.check_prefect_api(os.environ.get("PREFECT_API_URL") or PREFECT_API_URL.value())
    params = load_params(params_path)
    check_reachable(resolve_tracking_uri(params.project.tracking_uri))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--params", default="params.yaml", help="Parameters file.")
    parser.add_argument(
        "--stages",
        nargs="*",
        default=None,
        help="Stages (or items such as train@slca-0) to run, in DAG order (default: all).",
    )
    parser.add_argument("--force", action="store_true", help="Re-run stages even if unchanged.")
    parser.add_argument("--serve", action="store_true", help="Serve a scheduled deployment instead.")
    parser.add_argument("--cron", default="0 3 * * *", help="Schedule of the served deployment.")
    args = parser.parse_args(argv)
    try:
        preflight(args.params)
        if args.serve:
            slca_pipeline.serve(
                name="nightly", cron=args.cron, parameters={"params_path": args.params, "force": args.force}
            )
            return 0
        slca_pipeline(params_path=args.params, stages=args.stages, force=args.force)
    except (ParamsError, TrackingError, ServerUnreachable, StageFailed) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # noqa: BLE001 - the flow already logged the details; end in one line
        print(f"error: {str(error).splitlines()[0] if str(error) else type(error).__name__}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
