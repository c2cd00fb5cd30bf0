"""Scale-out files in infra/: compose wiring, images, accelerate/DeepSpeed configs, README commands.

Fast and Docker-free: YAML/JSON are parsed and cross-checked against each other, accelerate's own
launcher validates the configs, and the README's launch commands are fed to the real entry point.
Only `docker compose config` needs Docker; without it that one check is skipped.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO_ROOT

INFRA = REPO_ROOT / "infra"
COMPOSE_FILE = INFRA / "docker-compose.yml"
ENV_EXAMPLE = INFRA / ".env.example"
LONG_RUNNING = ("postgres", "minio", "mlflow", "prefect-server", "prefect-worker")
ONE_SHOT = ("check-secrets", "minio-init", "trainer", "trainer-gpu")
VARIABLE = re.compile(r"\$\{([A-Z0-9_]+)(?::?([-?])([^}]*))?\}")
DS_FIELDS_ACCELERATE_REFUSES = {
    "gradient_accumulation_steps",
    "gradient_clipping",
    "zero_stage",
    "offload_optimizer_device",
    "offload_param_device",
    "mixed_precision",
    "offload_param_nvme_path",
    "offload_optimizer_nvme_path",
    "zero3_save_16bit_model",
}


def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))


def services() -> dict[str, Any]:
    return compose()["services"]


def default_of(value: str) -> str:
    """`${VAR:-default}` → default (what compose uses when VAR is unset)."""
    match = VARIABLE.fullmatch(value)
    return match.group(3) if match and match.group(2) == "-" else value


def env_example() -> dict[str, str]:
    pairs = [
        line.split("=", 1)
        for line in ENV_EXAMPLE.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    return {key.strip(): value.strip() for key, value in pairs}


def command_text(service: dict[str, Any]) -> str:
    command = service.get("command", "")
    return " ".join(command) if isinstance(command, list) else str(command)


# ---- docker-compose.yml ------------------------------------------------------------------------


def test_compose_has_every_service_and_long_running_ones_have_healthchecks() -> None:
    found = services()
    assert set(LONG_RUNNING + ONE_SHOT) <= set(found)
    for name in LONG_RUNNING:
        check = found[name].get("healthcheck", {})
        assert check.get("test") and check["test"][0] in ("CMD", "CMD-SHELL"), name
    for name in ONE_SHOT:
        assert found[name]["restart"] == "no", name
    assert found["trainer"]["profiles"] == ["trainer"] and found["trainer-gpu"]["profiles"] == ["gpu"]


def test_every_healthy_dependency_has_a_healthcheck() -> None:
    found = services()
    for name, service in found.items():
        for dependency, condition in service.get("depends_on", {}).items():
            assert dependency in found, f"{name} depends on unknown {dependency}"
            if condition["condition"] == "service_healthy":
                assert "healthcheck" in found[dependency], f"{name} waits on {dependency}, which has no healthcheck"
    assert found["mlflow"]["depends_on"]["minio-init"]["condition"] == "service_completed_successfully"


def test_images_are_pinned_to_the_expected_versions() -> None:
    images = {name: default_of(service["image"]) for name, service in services().items()}
    assert re.fullmatch(r"ghcr\.io/mlflow/mlflow:v3\.17\.\d+-full", images["mlflow"])
    assert images["postgres"] == "postgres:16"
    assert images["prefect-server"] == "prefecthq/prefect:3.9-python3.11"
    assert re.fullmatch(r"quay\.io/minio/minio:RELEASE\.\d{4}-\d\d-\d\dT[\d-]+Z", images["minio"])
    assert re.fullmatch(r"quay\.io/minio/mc:RELEASE\.\d{4}-\d\d-\d\dT[\d-]+Z", images["minio-init"])
    assert not any(image.endswith(":latest") for image in images.values())
    built = {name: s["build"]["dockerfile"] for name, s in services().items() if "build" in s}
    assert built == {
        "prefect-worker": "infra/Dockerfile",
        "trainer": "infra/Dockerfile",
        "trainer-gpu": "infra/Dockerfile.gpu",
    }


def test_pipeline_containers_point_at_the_compose_servers() -> None:
    found = services()
    for name in ("prefect-worker", "trainer", "trainer-gpu"):
        env = found[name]["environment"]
        assert env["MLFLOW_TRACKING_URI"] == "http://mlflow:5000", name
        assert env["PREFECT_API_URL"] == "http://prefect-server:4200/api", name
        assert env["AWS_ENDPOINT_URL_S3"] == "http://minio:9000", name
        mounts = {volume.split(":")[1] for volume in found[name]["volumes"]}
        assert {"/workspace/slca/data", "/workspace/slca/models", "/workspace/slca/.dvc/cache"} <= mounts
    assert "--port 5000" in command_text(found["mlflow"])
    assert "--port 4200" in command_text(found["prefect-server"])
    assert found["trainer"]["command"] == ["make", "run"]


def test_mlflow_uses_postgres_and_minio_and_prefect_its_own_database() -> None:
    found = services()
    env = found["mlflow"]["environment"]
    assert env["MLFLOW_BACKEND_STORE_URI"].startswith("postgresql+psycopg2://")
    assert "@postgres:5432/${MLFLOW_DB:-mlflow}" in env["MLFLOW_BACKEND_STORE_URI"]
    assert env["MLFLOW_ARTIFACTS_DESTINATION"] == "s3://${MLFLOW_BUCKET:-mlflow}"
    assert env["MLFLOW_S3_ENDPOINT_URL"] == "http://minio:9000"
    assert "mlflow:*" in default_of(env["MLFLOW_SERVER_ALLOWED_HOSTS"]).split(",")
    command = command_text(found["mlflow"])
    for flag in ("--backend-store-uri", "--artifacts-destination", "--serve-artifacts", "--host 0.0.0.0"):
        assert flag in command
    prefect_db = found["prefect-server"]["environment"]["PREFECT_API_DATABASE_CONNECTION_URL"]
    assert prefect_db.startswith("postgresql+asyncpg://") and prefect_db.endswith(
        "@postgres:5432/${PREFECT_DB:-prefect}"
    )
    init_mount = [v for v in found["postgres"]["volumes"] if "docker-entrypoint-initdb.d" in v]
    assert init_mount and (INFRA / init_mount[0].split(":")[0]).is_file()
    assert "PREFECT_DB" in (INFRA / "postgres" / "create-databases.sh").read_text(encoding="utf-8")


def test_bucket_job_creates_the_mlflow_and_dvc_buckets() -> None:
    job = services()["minio-init"]
    script = command_text(job)
    assert "mc alias set store http://minio:9000" in script
    for bucket in ("MLFLOW_BUCKET", "DVC_BUCKET"):
        assert f'mc mb --ignore-existing "store/$${bucket}"' in script
    assert default_of(job["environment"]["DVC_BUCKET"]) == "slca-dvc"


def test_worker_serves_the_pool_of_the_nightly_deployment() -> None:
    deployments = yaml.safe_load((REPO_ROOT / "prefect.yaml").read_text(encoding="utf-8"))["deployments"]
    nightly = next(d for d in deployments if d["name"] == "nightly")
    command = services()["prefect-worker"]["command"]
    assert command[:3] == ["prefect", "worker", "start"]
    assert command[command.index("--pool") + 1] == nightly["work_pool"]["name"]
    assert command[command.index("--type") + 1] == "process" and "--with-healthcheck" in command


def test_env_example_defines_every_variable_with_placeholder_secrets() -> None:
    referenced = {match.group(1) for match in VARIABLE.finditer(COMPOSE_FILE.read_text(encoding="utf-8"))}
    example = env_example()
    assert referenced - set(example) == set()
    required = {m.group(1) for m in VARIABLE.finditer(COMPOSE_FILE.read_text(encoding="utf-8")) if m.group(2) == "?"}
    assert required == {"POSTGRES_PASSWORD", "MINIO_ROOT_PASSWORD"}
    assert all(example[name].startswith("change-me") for name in required)
    assert len(example["MINIO_ROOT_PASSWORD"]) >= 8  # MinIO refuses shorter root passwords
    assert ".env" in (INFRA / ".gitignore").read_text(encoding="utf-8").split()


HOST_PART = re.compile(r"(\$\{[^}]*\}|[^:]*):")  # "${BIND_ADDRESS:-127.0.0.1}:5000:5000" -> the ${...}


def test_every_published_port_binds_loopback_by_default() -> None:
    published = [(name, port) for name, service in services().items() for port in service.get("ports", [])]
    assert published
    for name, port in published:
        host_ip = port.get("host_ip", "") if isinstance(port, dict) else HOST_PART.match(str(port)).group(1)
        assert default_of(host_ip) == "127.0.0.1", f"{name}: {port}"
    assert env_example()["BIND_ADDRESS"] == "127.0.0.1"


def check_secrets(env: dict[str, str]) -> subprocess.CompletedProcess:
    """infra/check-secrets.sh run for real, with the arguments compose gives it."""
    service = services()["check-secrets"]
    script = INFRA / service["volumes"][0].split(":")[0]
    return subprocess.run(
        ["sh", str(script), *service["command"]], check=False, env=env, capture_output=True, text=True, timeout=30
    )


def test_check_secrets_guards_every_required_secret_before_anything_starts() -> None:
    found = services()
    required = {m.group(1) for m in VARIABLE.finditer(COMPOSE_FILE.read_text(encoding="utf-8")) if m.group(2) == "?"}
    job = found["check-secrets"]
    assert set(job["command"]) == required == set(job["environment"])
    assert job["entrypoint"] == ["/bin/sh", "/check-secrets.sh"]
    assert job["volumes"] == ["./check-secrets.sh:/check-secrets.sh:ro"]
    for name in ("postgres", "minio"):  # every other service waits on one of these
        assert found[name]["depends_on"]["check-secrets"]["condition"] == "service_completed_successfully", name


def test_check_secrets_refuses_the_placeholders_with_one_line_naming_them() -> None:
    example = env_example()
    result = check_secrets(example)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.splitlines() == [
        (
            "error: POSTGRES_PASSWORD, MINIO_ROOT_PASSWORD in infra/.env: empty or "
            "still the change-me placeholder of .env.example; set a real secret"
        )
    ]
    one_left = check_secrets({**example, "POSTGRES_PASSWORD": "s3cret-pg"})
    assert one_left.returncode == 1 and one_left.stderr.startswith("error: MINIO_ROOT_PASSWORD in infra/.env:")
    empty = check_secrets({"POSTGRES_PASSWORD": "", "MINIO_ROOT_PASSWORD": "s3cret-minio"})
    assert empty.returncode == 1 and empty.stderr.startswith("error: POSTGRES_PASSWORD in infra/.env:")
    real = check_secrets({"POSTGRES_PASSWORD": "s3cret-pg", "MINIO_ROOT_PASSWORD": "s3cret-minio"})
    assert (real.returncode, real.stdout, real.stderr) == (0, "", "")


def test_docker_compose_accepts_the_file() -> None:
    docker = shutil.which("docker")
    probe = (
        subprocess.run([docker, "compose", "version"], check=False, capture_output=True, text=True) if docker else None
    )
    if probe is None or probe.returncode != 0:
        pytest.skip("docker compose is not installed here; the YAML-level checks above still ran")
    result = subprocess.run(
        [docker, "compose", "-f", str(COMPOSE_FILE), "--env-file", str(ENV_EXAMPLE), "config", "-q"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


# ---- Dockerfiles -------------------------------------------------------------------------------


def instructions(dockerfile: Path) -> list[str]:
    """Every instruction, continuation lines joined, comments dropped."""
    text = dockerfile.read_text(encoding="utf-8").replace("\\\n", " ")
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def run_lines(dockerfile: Path) -> list[str]:
    """RUN instructions with their continuation lines joined."""
    return [step for step in instructions(dockerfile) if step.startswith("RUN ")]


def test_cpu_dockerfile_installs_cpu_torch_before_the_package() -> None:
    dockerfile = INFRA / "Dockerfile"
    assert re.search(r"^FROM python:3\.11-slim$", dockerfile.read_text(encoding="utf-8"), re.M)
    runs = run_lines(dockerfile)
    torch_at = next(i for i, line in enumerate(runs) if "torch==2.13.0" in line)
    package_at = next(i for i, line in enumerate(runs) if "-e '.[pipeline,dev,tau2]'" in line)
    assert torch_at < package_at
    assert "--index-url https://download.pytorch.org/whl/cpu" in runs[torch_at]
    makefile = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    stamp = re.search(r"^STAMP\s*:=\s*\$\(VENV\)/(\S+)", makefile, re.M).group(1)
    assert any(f"touch .venv/{stamp}" in line for line in runs)  # so `make run` skips reinstalling


def test_gpu_dockerfile_builds_on_cuda_with_the_gpu_extra() -> None:
    text = (INFRA / "Dockerfile.gpu").read_text(encoding="utf-8")
    assert re.search(r"^ARG CUDA_IMAGE=nvidia/cuda:[\w.-]+-devel-ubuntu\d\d\.04$", text, re.M)
    assert re.search(r"^FROM \$\{CUDA_IMAGE\}$", text, re.M)
    runs = run_lines(INFRA / "Dockerfile.gpu")
    assert any("-e '.[pipeline,gpu,dev,tau2]'" in line for line in runs)
    assert any("deepspeed>=0.19,<0.20" in line for line in runs)
    assert not any("whl/cpu" in line for line in runs)


DOCKERFILES = sorted(p for p in INFRA.glob("Dockerfile*") if not p.name.endswith(".dockerignore"))


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_images_run_as_an_unprivileged_user_who_owns_what_it_writes(dockerfile: Path) -> None:
    steps = instructions(dockerfile)
    users = [i for i, step in enumerate(steps) if step.startswith("USER ")]
    assert users, f"{dockerfile.name} runs as root"
    user = steps[users[-1]].split()[1]
    assert user.split(":")[0] not in ("root", "0")
    after = steps[users[-1] :]
    assert all(f"--chown={user}:{user}" in step for step in after if step.startswith(("COPY ", "ADD ")))
    # a new named volume takes the owner of the folder it mounts on, so the image must create them
    workdir = next(step.split()[1] for step in reversed(steps) if step.startswith("WORKDIR "))
    mounts = {
        volume.split(":")[1]
        for service in services().values()
        if service.get("build", {}).get("dockerfile") == f"infra/{dockerfile.name}"
        for volume in service.get("volumes", [])
    }
    created = {
        word
        for step in after
        if step.startswith("RUN ")
        for command in step[4:].split("&&")
        if command.split()[:2] == ["mkdir", "-p"]
        for word in command.split()[2:]
    }
    assert mounts and {str(Path(m).relative_to(workdir)) for m in mounts} <= created


@pytest.mark.parametrize("name", ["Dockerfile", "Dockerfile.gpu"])
def test_dockerignore_keeps_local_state_out(name: str) -> None:
    ignored = set((INFRA / f"{name}.dockerignore").read_text(encoding="utf-8").split())
    assert {".git", ".venv", "infra/.env", "data", "models", "mlflow.db", ".dvc/config.local"} <= ignored


# ---- accelerate / DeepSpeed --------------------------------------------------------------------

ACCELERATE_FILES = sorted((INFRA / "accelerate").glob("*.yaml"))


def test_the_three_launch_setups_exist() -> None:
    assert [p.name for p in ACCELERATE_FILES] == ["ddp.yaml", "zero2.yaml", "zero3.yaml"]


@pytest.mark.parametrize("path", ACCELERATE_FILES, ids=lambda p: p.name)
def test_accelerate_config_loads_and_names_an_existing_deepspeed_json(path: Path) -> None:
    from accelerate.commands.config.config_args import ClusterConfig

    config = ClusterConfig.from_yaml_file(str(path))  # unknown keys raise
    assert config.num_machines == 1 and config.use_cpu is False
    ds_file = config.deepspeed_config.get("deepspeed_config_file")
    if config.distributed_type.value == "MULTI_GPU":
        assert ds_file is None and config.mixed_precision == "bf16"
        return
    assert config.distributed_type.value == "DEEPSPEED"
    assert (REPO_ROOT / ds_file).is_file()
    stage = json.loads((REPO_ROOT / ds_file).read_text(encoding="utf-8"))["zero_optimization"]["stage"]
    assert f"zero{stage}" == path.stem
    assert set(config.deepspeed_config) & DS_FIELDS_ACCELERATE_REFUSES == set()
    assert config.mixed_precision is None  # precision comes from the JSON / the trainer


@pytest.mark.parametrize("stage", [2, 3])
def test_deepspeed_json_has_its_stage_and_leaves_batching_to_the_trainer(stage: int) -> None:
    config = json.loads((INFRA / "deepspeed" / f"zero{stage}.json").read_text(encoding="utf-8"))
    assert config["zero_optimization"]["stage"] == stage
    for key in (
        "train_batch_size",
        "train_micro_batch_size_per_gpu",
        "gradient_accumulation_steps",
        "gradient_clipping",
    ):
        assert config[key] == "auto", key
    assert config["bf16"] == {"enabled": "auto"}
    if stage == 3:
        assert config["zero_optimization"]["stage3_gather_16bit_weights_on_model_save"] is True


def readme_launch_commands() -> list[list[str]]:
    """Every `accelerate launch` command of infra/README.md, split into argv (env prefixes dropped)."""
    text = (INFRA / "README.md").read_text(encoding="utf-8").replace("\\\n", " ")
    commands = []
    for line in text.splitlines():
        if "accelerate launch" in line and not line.lstrip().startswith(("#", "`", "|")):
            argv = shlex.split(line.split("accelerate launch", 1)[1])
            commands.append(argv)
    return commands


def test_readme_vllm_server_binds_loopback() -> None:
    from trl.scripts.vllm_serve import build_command, make_parser

    text = (INFRA / "README.md").read_text(encoding="utf-8").replace("\\\n", " ")
    lines = [line for line in text.splitlines() if "trl vllm-serve" in line and "--model" in line]
    assert len(lines) == 1
    argv = shlex.split(lines[0].split("trl vllm-serve", 1)[1].split("&")[0])
    script_args, extra = make_parser().parse_args_and_config(args=argv, return_remaining_strings=True)
    assert (script_args.host, script_args.port, extra) == ("127.0.0.1", 8001, [])
    command = build_command(script_args)
    assert command[command.index("--host") + 1] == "127.0.0.1"  # what TRL hands to vLLM


def test_readme_names_every_unauthenticated_service_and_the_proxy() -> None:
    text = (INFRA / "README.md").read_text(encoding="utf-8")
    section = text.split("## 6. What has no authentication", 1)[1]
    rows = [line.split("|")[1].strip() for line in section.splitlines() if line.startswith("| ")][1:]
    assert rows == [
        "vLLM server (`trl vllm-serve`)",
        "MLflow server",
        "Prefect server (API and UI)",
        "Streamlit dashboard (`slca dashboard`)",
    ]
    for port in ("5000", "4200", "8501"):
        assert f"reverse_proxy 127.0.0.1:{port}" in section
    assert "BIND_ADDRESS=0.0.0.0` lets anyone on the network" in text


def test_readme_launch_commands_pass_accelerate_and_reach_train_stage_main(monkeypatch) -> None:
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.dataclasses import DeepSpeedPlugin

    import slca.train.train_stage as train_stage
    from slca.config import load_params, parse_params

    commands = readme_launch_commands()
    assert len(commands) == 4
    calls: list[tuple[str, int, bool]] = []
    monkeypatch.setattr(train_stage, "run_train", lambda p, e, s: calls.append((e, s, p.train.use_vllm)) or {})
    vllm_params = yaml.safe_load((REPO_ROOT / "params.yaml").read_text(encoding="utf-8"))
    vllm_params["train"].update(use_vllm=True, vllm_mode="server", vllm_server_base_url="http://127.0.0.1:8001")
    monkeypatch.setattr(
        train_stage,
        "load_params",
        lambda path: parse_params(vllm_params, path) if path == "params.vllm.yaml" else load_params(REPO_ROOT / path),
    )
    for argv in commands:
        args, defaults, precision_from_file = _validate_launch_command(launch_command_parser().parse_args(argv))
        assert args.module and args.training_script == "slca.train.train_stage"
        if args.use_deepspeed:
            fields = list(defaults.deepspeed_config) + (["mixed_precision"] if precision_from_file else [])
            monkeypatch.setenv("ACCELERATE_CONFIG_DS_FIELDS", ",".join(fields))
            DeepSpeedPlugin._deepspeed_config_checks(None)  # accelerate's own rule for config files
        assert train_stage.main(args.training_script_args) == 0
    assert calls == [("slca", 0, False)] * 3 + [("slca", 0, True)]
