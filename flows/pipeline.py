"""Prefect flow over the DVC pipeline: one task per DVC stage, one MLflow parent run.

DVC owns the DAG and caching; this flow owns running and scheduling. Each task runs
`dvc repro --single-item <stage>` (a `matrix` stage runs all its items), so unchanged stages are
skipped by DVC's own cache. The MLflow parent run id reaches every stage process through the
environment (`SLCA_PARENT_RUN_ID`), so each stage's run nests under it.

    python flows/pipeline.py                   # ephemeral Prefect, whole pipeline
    python flows/pipeline.py --stages synthesize calibrate
    python flows/pipeline.py --serve           # long-running deployment with a schedule
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from prefect import flow, get_run_logger, task

from slca.config import load_params
from slca.tracking import pipeline_run


class StageFailed(RuntimeError):
    """A DVC stage exited non-zero."""


def dvc_stages(dvc_file: Path = Path("dvc.yaml")) -> list[str]:
    """Top-level stage names of dvc.yaml, in file order (which is the DAG order)."""
    try:
        stages = yaml.safe_load(dvc_file.read_text(encoding="utf-8"))["stages"]
    except (OSError, KeyError, TypeError, yaml.YAMLError) as error:
        raise StageFailed(f"{dvc_file}: cannot read the stage list ({error})") from None
    return list(stages)


def _stream_lines(stream: Any) -> Iterator[str]:
    """Non-empty lines of a byte stream, ended by \n or \r, as soon as each is complete."""
    pending = b""
    while chunk := stream.read1(4096):
        parts = re.split(rb"[\r\n]", pending + chunk)
        pending = parts.pop()
        yield from (part.decode("utf-8", "replace") for part in parts if part.strip())
    if pending.strip():
        yield pending.decode("utf-8", "replace")


def _dvc_executable() -> str:
    beside_python = Path(sys.executable).with_name("dvc")
    return str(beside_python) if beside_python.exists() else (shutil.which("dvc") or "dvc")


@task(retries=1, retry_delay_seconds=5, task_run_name="dvc-repro-{stage}")
def repro_stage(stage: str, force: bool = False) -> str:
    """Reproduce one DVC stage (retried once: a transient failure should not end the run)."""
    logger = get_run_logger()
    command = [_dvc_executable(), "repro", "--single-item", stage] + (["--force"] if force else [])
    logger.info("running %s", " ".join(command))
    # Stream the stage's output as it comes (split on \r too), so progress bars show live.
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          env=os.environ.copy()) as process:
        assert process.stdout is not None
        for line in _stream_lines(process.stdout):
            logger.info(line)
        code = process.wait()
    if code != 0:
        raise StageFailed(f"stage {stage!r} failed with exit code {code}")
    return stage


@flow(name="slca-pipeline", log_prints=True)
def slca_pipeline(params_path: str = "params.yaml", stages: list[str] | None = None,
                  force: bool = False) -> list[str]:
    """Run the DVC stages in order under one MLflow parent run; returns the stages run."""
    params = load_params(params_path)
    selected = stages or dvc_stages()
    done: list[str] = []
    with pipeline_run(params, name="pipeline") as parent:
        print(f"MLflow parent run {parent.info.run_id}")
        for stage in selected:
            done.append(repro_stage(stage, force=force))
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--params", default="params.yaml", help="Parameters file.")
    parser.add_argument("--stages", nargs="*", default=None, help="Stages to run (default: all).")
    parser.add_argument("--force", action="store_true", help="Re-run stages even if unchanged.")
    parser.add_argument("--serve", action="store_true", help="Serve a scheduled deployment instead.")
    parser.add_argument("--cron", default="0 3 * * *", help="Schedule of the served deployment.")
    args = parser.parse_args(argv)
    if args.serve:
        slca_pipeline.serve(name="nightly", cron=args.cron,
                            parameters={"params_path": args.params, "force": args.force})
        return 0
    try:
        slca_pipeline(params_path=args.params, stages=args.stages, force=args.force)
    except Exception as error:  # the flow already logged the details; end in one line
        print(f"error: {str(error).splitlines()[0] if str(error) else type(error).__name__}",
              file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
