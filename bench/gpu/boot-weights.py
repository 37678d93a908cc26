"""The weight-reading side of the boot benchmark (bench/gpu/boot.sh).

    python3 bench/gpu/boot-weights.py write OUT.nemo [--config full] [--seed 0]
        A synthetic Parakeet-TDT .nemo in the real layout: a plain tar holding ./model_config.yaml (the
        model section of a NeMo config) and ./model_weights.ckpt (torch.save of the fp32 state dict),
        seeded random weights of the chosen shapes (full: Parakeet-TDT-0.6B-v2, 617,825,926
        parameters). No tokenizer: the adapter then uses its synthetic vocabulary.
    python3 bench/gpu/boot-weights.py drop-cache FILE
        fsync, then posix_fadvise(POSIX_FADV_DONTNEED) over the whole file: its clean pages leave
        the page cache, so the next read comes from the device (no root needed).
    python3 bench/gpu/boot-weights.py read-compare FILE.nemo [--repeat 3] [--threads 8,16] [--out X.json]
        Reads the weights both ways in this process, the cache dropped before each read, alternating
        the order each round: ``stream`` (the previous path: the member extracted to a temporary
        file, then torch.load with mmap) and ``parallel`` with each thread count; checks that every
        way loads the same tensors; prints a JSON report.
    python3 bench/gpu/boot-weights.py summarize OUT_DIR --command "..." [--commit SHA]
        Collects boot.sh's runs (OUT_DIR/runs/*.ready.json and *.timing.json) into results.json.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "host"))

import torch  # noqa: E402
import yaml  # noqa: E402

from voxmux_host.boot_stages import StageTimer  # noqa: E402
from voxmux_host.models.parakeet.config import PRESETS, ParakeetConfig  # noqa: E402
from voxmux_host.models.parakeet.model import build_model  # noqa: E402
from voxmux_host.models.parakeet.nemo import read_nemo  # noqa: E402


def nemo_config_for(c: ParakeetConfig) -> Dict[str, Any]:
    """``c`` as the model section of a Parakeet-TDT model_config.yaml (what nemo.config_from_nemo reads)."""
    return {
        "sample_rate": c.sample_rate_hz,
        "preprocessor": {
            "_target_": "nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor",
            "sample_rate": c.sample_rate_hz,
            "normalize": "per_feature",
            "window_size": c.win_length / c.sample_rate_hz,
            "window_stride": c.hop_length / c.sample_rate_hz,
            "window": "hann",
            "features": c.n_mels,
            "n_fft": c.n_fft,
            "log": True,
            "frame_splicing": 1,
            "dither": 1e-05,
            "preemph": c.preemph,
            "log_zero_guard_value": c.log_zero_guard,
        },
        "encoder": {
            "_target_": "nemo.collections.asr.modules.ConformerEncoder",
            "feat_in": c.n_mels,
            "feat_out": -1,
            "n_layers": c.n_layers,
            "d_model": c.d_model,
            "subsampling": "dw_striding",
            "subsampling_factor": c.subsampling_factor,
            "subsampling_conv_channels": c.subsampling_channels,
            "causal_downsampling": False,
            "ff_expansion_factor": c.ff_expansion,
            "self_attention_model": "rel_pos",
            "n_heads": c.n_heads,
            "att_context_size": [-1, -1],
            "xscaling": c.xscaling,
            "untie_biases": True,
            "pos_emb_max_len": 5000,
            "conv_kernel_size": c.conv_kernel_size,
            "conv_norm_type": "batch_norm",
            "conv_context_size": None,
            "use_bias": c.use_bias,
        },
        "decoder": {
            "_target_": "nemo.collections.asr.modules.RNNTDecoder",
            "blank_as_pad": True,
            "vocab_size": c.vocab_size,
            "prednet": {"pred_hidden": c.pred_hidden, "pred_rnn_layers": c.pred_layers},
        },
        "joint": {
            "_target_": "nemo.collections.asr.modules.RNNTJoint",
            "num_classes": c.vocab_size,
            "num_extra_outputs": len(c.durations),
            "jointnet": {
                "joint_hidden": c.joint_hidden,
                "activation": "relu",
                "dropout": 0.2 if c.joint_dropout_layer else 0.0,
                "encoder_hidden": c.d_model,
                "pred_hidden": c.pred_hidden,
            },
        },
        "decoding": {"strategy": "greedy_batch", "model_type": "tdt", "durations": list(c.durations),
                     "greedy": {"max_symbols": c.max_symbols}},
    }


def write_nemo(path: Path, config_name: str, seed: int, n_layers: Optional[int] = None) -> Dict[str, Any]:
    """Writes the archive (through a temporary name, then renamed) and syncs it to the device."""
    config = PRESETS[config_name]
    if n_layers is not None:
        config = dataclasses.replace(config, n_layers=n_layers)
    started = time.perf_counter()
    state = build_model(config, seed=seed).state_dict()
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as scratch:
        weights = Path(scratch) / "model_weights.ckpt"
        torch.save(state, weights)
        conf = Path(scratch) / "model_config.yaml"
        conf.write_text(yaml.safe_dump(nemo_config_for(config)))
        partial = path.with_suffix(path.suffix + ".partial")
        with tarfile.open(partial, "w:") as tar:  # NeMo writes plain tars, members named ./<name>
            tar.add(conf, arcname="./model_config.yaml")
            tar.add(weights, arcname="./model_weights.ckpt")
        _fsync(partial)
        os.replace(partial, path)
    with tarfile.open(path, "r:") as tar:
        member = tar.getmember("./model_weights.ckpt")
    return {
        "path": str(path),
        "config": config_name if n_layers is None else f"{config_name} with {n_layers} encoder layers",
        "seed": seed,
        "parameters": sum(t.numel() for t in state.values()),
        "fileBytes": path.stat().st_size,
        "weightsBytes": member.size,
        "writeS": round(time.perf_counter() - started, 2),
    }


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def drop_cache(path: Path) -> str:
    """Evicts the file's clean pages from the page cache; returns the method, for the report."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return "fsync + posix_fadvise(POSIX_FADV_DONTNEED) on the file before each read"


def read_compare(path: Path, repeat: int, thread_counts: List[int]) -> Dict[str, Any]:
    ways = [("stream", 1)] + [("parallel", t) for t in thread_counts]
    runs: List[Dict[str, Any]] = []
    reference: Optional[Dict[str, torch.Tensor]] = None
    for round_index in range(repeat):
        for mode, threads in ways if round_index % 2 == 0 else list(reversed(ways)):
            method = drop_cache(path)
            timer = StageTimer()
            started = time.perf_counter()
            archive = read_nemo(str(path), weight_read=mode, threads=threads, timer=timer)
            total_ms = (time.perf_counter() - started) * 1000
            # What load_state_dict does next: copy every tensor. The stream path's tensors are mmap
            # views of its temporary file, so part of its cost lands here, not in weight_read.
            copy_started = time.perf_counter()
            for tensor in archive.state_dict.values():
                torch.empty_like(tensor).copy_(tensor)
            copy_ms = (time.perf_counter() - copy_started) * 1000
            [stage] = [s for s in timer.take() if s.stage == "weight_read"]
            if reference is None:
                reference = archive.state_dict
            elif round_index == 0:
                _check_equal(reference, archive.state_dict, f"{mode} x{threads}")
            runs.append({"way": f"{mode}" if mode == "stream" else f"parallel-{threads}", "round": round_index,
                         "weightReadMs": round(stage.ms, 1), "bytes": stage.bytes,
                         "mbPerS": round(stage.bytes / 1e6 / (stage.ms / 1000), 1), "readNemoMs": round(total_ms, 1),
                         "copyMs": round(copy_ms, 1), "readNemoAndCopyMs": round(total_ms + copy_ms, 1)})
            del archive
    summary = {}
    for way in dict.fromkeys(r["way"] for r in runs):
        mine = [r for r in runs if r["way"] == way]
        summary[way] = {"weightReadMsMedian": statistics.median(r["weightReadMs"] for r in mine),
                        "mbPerSMedian": statistics.median(r["mbPerS"] for r in mine),
                        "readNemoAndCopyMsMedian": statistics.median(r["readNemoAndCopyMs"] for r in mine)}
    return {"file": str(path), "fileBytes": path.stat().st_size, "cache": method, "repeat": repeat,
            "summary": summary, "runs": runs, "machine": machine()}


def _check_equal(a: Dict[str, torch.Tensor], b: Dict[str, torch.Tensor], what: str) -> None:
    if list(a) != list(b) or any(not torch.equal(a[k], b[k]) for k in a):
        raise SystemExit(f"{what} loaded different tensors than the first read")


def machine() -> Dict[str, Any]:
    info: Dict[str, Any] = {"host": socket.gethostname(), "cpus": os.cpu_count(), "python": platform.python_version(),
                            "torch": torch.__version__}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def _git_commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def summarize(out_dir: Path, command: str, commit: Optional[str]) -> Dict[str, Any]:
    runs: List[Dict[str, Any]] = []
    for timing_file in sorted((out_dir / "runs").glob("*.timing.json")):
        timing = json.loads(timing_file.read_text())
        ready_file = timing_file.with_name(timing_file.name.replace(".timing.json", ".ready.json"))
        boots = []
        if ready_file.exists():
            ready = json.loads(ready_file.read_text())
            boots = [i.get("boot") for m in ready.get("models", {}).values() for i in m.get("instances", [])]
        runs.append({**timing, "instanceBoots": boots})
    summary: Dict[str, Any] = {}
    for config in dict.fromkeys(r["config"] for r in runs):
        mine = [r for r in runs if r["config"] == config and r.get("ok")]
        boots = [b for r in mine for b in r["instanceBoots"] if b]

        def median(values: List[float]) -> Optional[float]:
            return round(statistics.median(values), 1) if values else None

        def stage_ms(boot: Dict[str, Any], name: str) -> float:
            return sum(s["ms"] for s in boot["stages"] if s["stage"] == name)

        summary[config] = {
            "runs": len(mine),
            "serverStartToReadyMsMedian": median([r["serverStartToReadyMs"] for r in mine]),
            "firstAnswerMsMedian": median([r["firstAnswerMs"] for r in mine if r.get("firstAnswerMs") is not None]),
            "wakeAnswerMsMedian": median([r["wakeAnswerMs"] for r in mine if r.get("wakeAnswerMs") is not None]),
            "instanceSpawnToReadyMsMedian": median([b["totalMs"] for b in boots]),
            "processStartMsMedian": median([b["processStartMs"] for b in boots]),
            "loadMsMedian": median([b["loadMs"] for b in boots]),
            "warmupMsMedian": median([b["warmupMs"] for b in boots]),
            "stageMsMedian": {name: median([stage_ms(b, name) for b in boots])
                              for name in ("import", "device_init", "weight_read", "model_build", "device_upload", "compile", "warmup",
                                           "graph_capture")},
            "weightReadMBPerSMedian": median([b["weightReadBytesPerSecond"] / 1e6 for b in boots
                                              if b.get("weightReadBytesPerSecond")]),
        }
    report = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "commit": commit or _git_commit(),
        "command": command,
        "cache": "fsync + posix_fadvise(POSIX_FADV_DONTNEED) on the .nemo before each server start",
        "summary": summary,
        "runs": runs,
    }
    for extra in ("checkpoint.json", "read-compare.json", "gpu.txt", "filesystems.txt"):
        if (out_dir / extra).exists():
            text = (out_dir / extra).read_text()
            report[extra.split(".")[0]] = json.loads(text) if extra.endswith(".json") else text.strip()
    return report


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="action", required=True)
    write = sub.add_parser("write")
    write.add_argument("path", type=Path)
    write.add_argument("--config", default="full", choices=sorted(PRESETS))
    write.add_argument("--seed", type=int, default=0)
    write.add_argument("--n-layers", type=int, help="another encoder depth (a smaller file for a CPU check)")
    drop = sub.add_parser("drop-cache")
    drop.add_argument("path", type=Path)
    compare = sub.add_parser("read-compare")
    compare.add_argument("path", type=Path)
    compare.add_argument("--repeat", type=int, default=3)
    compare.add_argument("--threads", default="8,16")
    compare.add_argument("--out", type=Path)
    summ = sub.add_parser("summarize")
    summ.add_argument("out_dir", type=Path)
    summ.add_argument("--command", required=True)
    summ.add_argument("--commit")
    args = parser.parse_args(argv)
    if args.action == "write":
        result: Dict[str, Any] = write_nemo(args.path, args.config, args.seed, args.n_layers)
    elif args.action == "drop-cache":
        result = {"path": str(args.path), "method": drop_cache(args.path)}
    elif args.action == "read-compare":
        result = read_compare(args.path, args.repeat, [int(t) for t in str(args.threads).split(",") if t])
    else:
        result = summarize(args.out_dir, args.command, args.commit)
        (args.out_dir / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    text = json.dumps(result, indent=2)
    if getattr(args, "out", None) is not None:
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
