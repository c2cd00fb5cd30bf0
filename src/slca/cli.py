"""The `slca` command: one sub-command per pipeline stage, plus tools.

    slca synthesize                 # data/{train,val,test}.jsonl, validated
    slca calibrate                  # reports/calibration.json
    slca sft                        # models/sft
    slca train --estimator slca --seed 0
    slca evaluate --estimator slca --seed 0
    slca compare                    # reports/comparison.md
    slca bfcl score --category simple_python --results R.jsonl --out V.jsonl
    slca pipeline                   # parent MLflow run + `dvc repro`
    slca dashboard                  # Streamlit dashboard on 127.0.0.1:8501

Every stage reads `params.yaml` (or `--params`). Errors a user can cause end in one line on
stderr and exit code 2; nothing half-written is left behind.
"""

from __future__ import annotations

import errno
import importlib
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from slca.config import Params, ParamsError, load_params

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__.split("\n\n")[0])

ParamsOption = Annotated[Path, typer.Option("--params", "-p", help="Parameters file (YAML).")]


class UserError(Exception):
    """Marker base: any exception class whose instances are user-caused gets registered here."""


def _user_error_types() -> tuple[type[BaseException], ...]:
    """Exception types whose message is meant for the user (one line, exit 2)."""
    types: list[type[BaseException]] = [ParamsError, UserError, FileNotFoundError]
    from slca.tracking import TrackingError

    types.append(TrackingError)
    for module, name in (
        ("slca.data.expectations", "DataValidationError"),
        ("slca.eval.bfcl.cli", "ResultsFileError"),
        ("slca.eval.stage", "EvaluationError"),
        ("slca.eval.compare", "CompareError"),
        ("slca.experiment", "ExperimentError"),
        ("slca.eval.experiment_report", "ExperimentReportError"),
        ("slca.train.policy", "PolicyError"),
        ("slca.rollout.chat_format", "ChatFormatError"),
        ("slca.train.convert", "ConvertError"),
        ("slca.data.synthesis", "SynthesisError"),
        ("slca.eval.tau2_bench", "Tau2EndpointError"),
        ("slca.simulator.endpoint", "EndpointError"),
    ):
        loaded = sys.modules.get(module)  # only modules the failing stage imported can raise these
        if loaded is not None and hasattr(loaded, name):
            types.append(getattr(loaded, name))
    return tuple(types)


#: write failures a user fixes outside the program: a full disk or quota, a size limit, a read-only folder
WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM}

_PROFILE: list[str] = []  # set by the app callback's --profile


@app.callback()
def _options(
    profile: Annotated[
        str | None,
        typer.Option("--profile", help="Apply a params profile on top of the params file (real: pretrained policies)."),
    ] = None,
) -> None:
    _PROFILE[:] = [profile] if profile else []


def _load(params_path: Path) -> Params:
    from slca.config import apply_profile

    params = load_params(params_path)
    return apply_profile(params, _PROFILE[0]) if _PROFILE else params


def _run_stage(target: str | Callable[..., Any], params_path: Path | None, *args: Any) -> Any:
    """Load params, then import and call `module:function` (params first, so a bad file fails fast)."""
    try:
        params = _load(params_path) if params_path is not None else None
        if isinstance(target, str):
            module, name = target.split(":")
            target = getattr(importlib.import_module(module), name)
        return target(*(([params] if params is not None else []) + list(args)))
    except _user_error_types() as error:
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None
    except OSError as error:
        if error.errno not in WRITE_ERRNOS:
            raise
        where = error.filename or "an output file"
        typer.secho(
            (
                f"error: cannot write {where}: {error.strerror or error}; free space or make the folder "
                "writable and rerun (nothing half-written was kept)"
            ),
            fg=typer.colors.RED,
            err=True,
        )
        raise typer.Exit(2) from None


@app.command()
def synthesize(params: ParamsOption = Path("params.yaml")) -> None:
    """Synthesize train/val/test tasks with the real executors and validate them."""
    summary = _run_stage("slca.data.stage:run_synthesize", params)
    typer.echo(f"synthesized {summary}")


@app.command("validate-data")
def validate_data(
    data_dir: Annotated[Path, typer.Option(help="Directory holding train/val/test.jsonl.")] = Path("data"),
) -> None:
    """Run the great-expectations suite over existing data files."""
    _run_stage("slca.data.stage:validate_files", None, data_dir)
    typer.echo(f"{data_dir}: all expectations met")


@app.command()
def calibrate(params: ParamsOption = Path("params.yaml")) -> None:
    """Calibrate the tool simulator against the real executors."""
    report = _run_stage("slca.simulator.calibration:run_calibrate", params)
    heldout = report.get("heldout", {}) if isinstance(report, dict) else {}
    figures = ", ".join(
        f"{key} {heldout[key]:.3f}"
        for key in ("error_f1", "error_class_agreement", "conformance", "value_agreement", "consistency")
        if isinstance(heldout.get(key), (int, float))
    )
    typer.echo(f"calibration held-out: {figures}")


@app.command("reward-audit")
def reward_audit(params: ParamsOption = Path("params.yaml")) -> None:
    """Audit the training signal: an oracle and its corruptions, training and evaluation paths."""
    from slca.eval.reward_audit import AuditFailed, run_reward_audit

    try:
        report = _run_stage(run_reward_audit, params)
    except AuditFailed as error:
        typer.secho(f"error: {error}", fg=typer.colors.RED, err=True)
        raise typer.Exit(1) from None
    if isinstance(report, dict):
        oracle = {path: cases["oracle"]["success"] for path, cases in report["paths"].items()}
        typer.echo(
            f"reward audit passed: oracle Success train {oracle['train']:.3f}, eval {oracle['eval']:.3f}; "
            f"every corruption scores lower in the segment it corrupts"
        )


@app.command()
def base(params: ParamsOption = Path("params.yaml")) -> None:
    """Convert the pretrained base policy (policy.base_gguf, from its installed package) into policy.base_dir."""
    summary = _run_stage("slca.train.convert:run_base", params)
    if summary.get("base_gguf"):
        typer.echo(f"converted {summary['base_gguf']} in {summary['seconds']} s")
    else:
        typer.echo("no policy.base_gguf: the embedded tiny policy needs no base")


@app.command()
def sft(params: ParamsOption = Path("params.yaml")) -> None:
    """SFT warm-up of the policy on gold trajectories."""
    _run_stage("slca.train.sft:run_sft", params)


@app.command("sft-adapter")
def sft_adapter(
    out: Annotated[Path, typer.Option(help="Adapter directory to write (LoRA weights and what they were trained on).")],
    params: ParamsOption = Path("params.yaml"),
) -> None:
    """SFT warm-up saved as a LoRA adapter only, for `sft.init_adapter` (a long warm-up done once, committed)."""
    metrics = _run_stage("slca.train.sft:run_sft_adapter", params, out)
    typer.echo(f"wrote {out}: {metrics.get('sft_steps')} steps, final loss {metrics.get('sft_final_loss')}")


@app.command()
def train(
    estimator: Annotated[str, typer.Option(help="Advantage estimator: slca, grpo, gdpo, toolpo or rltr.")] = "slca",
    seed: Annotated[int, typer.Option(help="Training seed.")] = 0,
    params: ParamsOption = Path("params.yaml"),
) -> None:
    """SLCA-GRPO (or baseline) training of the SFT policy."""
    _run_stage("slca.train.train_stage:run_train", params, estimator, seed)


@app.command()
def evaluate(
    estimator: Annotated[str, typer.Option(help="Estimator of the run to evaluate; `sft` = the SFT warm-up.")] = "slca",
    seed: Annotated[int, typer.Option(help="Seed of the run to evaluate.")] = 0,
    params: ParamsOption = Path("params.yaml"),
) -> None:
    """Evaluate one trained run: in-domain, BFCL, tau2-bench."""
    _run_stage("slca.eval.stage:run_evaluate", params, estimator, seed)


@app.command()
def compare(params: ParamsOption = Path("params.yaml")) -> None:
    """Compare all evaluated runs: reports/comparison.md and plots."""
    _run_stage("slca.eval.compare:run_compare", params)


@app.command()
def experiment(
    spec: Annotated[Path, typer.Option("--spec", help="Experiment file: overrides and ablations.")] = Path(
        "experiments/headline.yaml"
    ),
    params: ParamsOption = Path("params.yaml"),
    lanes: Annotated[int | None, typer.Option(help="Jobs run side by side (default: the file's `lanes`).")] = None,
    report_only: Annotated[bool, typer.Option(help="Only rebuild the report from finished runs.")] = False,
    only: Annotated[list[str] | None, typer.Option(help="Run only these groups (main or an ablation's name).")] = None,
    dvc_exp: Annotated[
        bool, typer.Option(help="Print each group as a `dvc exp run -S ...` command; run nothing.")
    ] = False,
    budget_minutes: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            help="Start no job expected (from finished jobs' stamps) to end after this many minutes; "
            "the next call runs what is left.",
        ),
    ] = None,
) -> None:
    """The headline experiment: every estimator × seed from one SFT checkpoint, then reports/experiment.md."""
    from slca.experiment import run_experiment

    def _run() -> None:
        numbers = run_experiment(
            spec,
            params,
            lanes=lanes,
            report_only=report_only,
            only=only or (),
            dvc_exp=dvc_exp,
            budget_minutes=budget_minutes,
        )
        for line in numbers.get("dvc_exp_commands") or []:
            typer.echo(line)
        for line in numbers.get("verdict_lines") or []:
            typer.echo(line)
        if numbers.get("deferred"):
            left = numbers["deferred"]
            typer.echo(f"{len(left)} job(s) left for the next call (over the budget): {', '.join(left)}")

    _run_stage(_run, None)


@app.command()
def pipeline(
    params: ParamsOption = Path("params.yaml"),
    force: Annotated[bool, typer.Option(help="Re-run every stage (dvc repro --force).")] = False,
) -> None:
    """Open the parent MLflow run and reproduce the DVC pipeline under it."""
    from slca.tracking import pipeline_run

    def _repro(p: Params) -> None:
        with pipeline_run(p):
            command = [str(Path(sys.executable).with_name("dvc")), "repro"] + (["--force"] if force else [])
            code = subprocess.call(command)
            if code:
                raise UserError(f"dvc repro failed with exit code {code}; see the stage output above")

    _run_stage(_repro, params)


@app.command()
def dashboard(
    tracking_uri: Annotated[
        str | None,
        typer.Option(help="MLflow store to show (default: MLFLOW_TRACKING_URI, else <project-dir>/mlflow.db)."),
    ] = None,
    project_dir: Annotated[
        Path, typer.Option(exists=True, file_okay=False, help="Folder with params.yaml, models/ and reports/.")
    ] = Path("."),
    port: Annotated[int, typer.Option(help="Port to serve on.")] = 8501,
    host: Annotated[
        str,
        typer.Option(help="Interface to bind; the dashboard has no authentication, so keep loopback or add a proxy."),
    ] = "127.0.0.1",
) -> None:
    """Serve the Streamlit dashboard; the store and folder are fixed here, not editable in the page."""
    from slca.dashboard_data import launch_command, launch_env

    command = launch_command(host, port)
    env = launch_env(tracking_uri, project_dir, os.environ)
    typer.echo(f"dashboard: http://{host}:{port} (tracking {env['MLFLOW_TRACKING_URI']})")
    os.execve(command[0], command, env)  # streamlit takes over the process, Ctrl-C included


@app.command("profile")
def profile(
    name: Annotated[str, typer.Argument(help="Profile to apply (real: pretrained policies).")],
    params: ParamsOption = Path("params.yaml"),
    model_path: Annotated[str | None, typer.Option(help="Set policy.model_path too.")] = None,
    write: Annotated[
        Path | None, typer.Option(help="Write the result here (atomically) instead of printing it.")
    ] = None,
) -> None:
    """Print (or write) the params file with a profile applied: what `dvc repro` should read."""
    from slca.config import apply_profile, dump_params, with_overrides
    from slca.tracking import write_atomic

    def build(loaded: Params) -> str:
        merged = apply_profile(loaded, name)
        if model_path is not None:
            merged = with_overrides(merged, {"policy.model_path": model_path}, "--model-path")
        return dump_params(merged)

    text = _run_stage(build, params)
    if write is None:
        typer.echo(text, nl=False)
    else:
        write_atomic(write, text)
        typer.echo(f"wrote {write} (profile {name})")


@app.command("convert-gguf")
def convert_gguf(
    gguf_file: Annotated[Path, typer.Argument(help="GGUF checkpoint to convert.")],
    out_dir: Annotated[Path, typer.Argument(help="Hugging Face model directory to write.")],
    dtype: Annotated[str, typer.Option(help="Saved weight dtype: float32 or bfloat16.")] = "float32",
) -> None:
    """Convert a GGUF checkpoint into a local Hugging Face directory for `policy.model_path`."""
    from slca.train.convert import gguf_to_hf

    folder = _run_stage(gguf_to_hf, None, gguf_file, out_dir, dtype)
    typer.echo(f"converted {gguf_file} -> {folder}")


def _mount_subapps() -> None:
    try:
        from slca.eval.bfcl.cli import bfcl_app
    except ImportError:
        return
    app.add_typer(bfcl_app, name="bfcl", help="BFCL v4: score result files with the AST checker.")


_mount_subapps()


PIPELINE_PACKAGES = {
    "mlflow",
    "prefect",
    "dvc",
    "streamlit",
    "great_expectations",
    "matplotlib",
    "peft",
    "tree_sitter",
    "tree_sitter_java",
    "tree_sitter_javascript",
    "tau2",
    "pandas",
}


def main() -> None:
    try:
        app()
    except ModuleNotFoundError as error:
        if (error.name or "").split(".")[0] not in PIPELINE_PACKAGES:
            raise
        typer.secho(
            (
                f"error: this command needs the pipeline extra ({error.name} is not installed): "
                "pip install 'slca[pipeline]' (make install installs it)"
            ),
            fg=typer.colors.RED,
            err=True,
        )
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
