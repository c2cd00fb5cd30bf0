"""Two-process CPU training (accelerate + gloo) with uneven turn counts across processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from grpo_fixtures import make_policy, synthetic_tasks, write_tasks

SCRIPT = Path(__file__).parent / "scripts" / "two_process_train.py"


def test_two_processes_run_equal_rounds_and_keep_groups_whole(tmp_path):
    tasks = synthetic_tasks(8)
    write_tasks(tmp_path, tasks)
    make_policy(tmp_path / "sft", tasks)
    accelerate = Path(sys.executable).with_name("accelerate")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    done = subprocess.run(
        [
            str(accelerate),
            "launch",
            "--multi_gpu",
            "--num_processes",
            "2",
            "--num_machines",
            "1",
            "--mixed_precision",
            "no",
            "--dynamo_backend",
            "no",
            "--main_process_port",
            "29533",
            str(SCRIPT),
            str(tmp_path),
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads((tmp_path / "two_process.json").read_text())
    assert seen["world_size"] == 2 and seen["global_step"] == 2
    # process 0 calls tools on every allowed turn (3 rounds a step), process 1 answers at once:
    # both still generate the same number of times, with equal batches (checked inside)
    assert seen["generation_calls"] == [6, 6]
    assert seen["groups_ok"] and all(seen["groups_ok"])
