"""Beam's pipeline options as seqline's Beam runner takes them, checked before a run starts."""

from __future__ import annotations

import difflib

from apache_beam.options.pipeline_options import PipelineOptions

from seqline.pipeline.errors import ConfigError


def on_fn_api_runner(options: list[str]) -> bool:
    """Whether `options` leave Beam's FnApiRunner chosen (no `--runner`)."""
    return not any(o.startswith("--runner") for o in options)


def scratch_location(options: list[str], scratch: str | None = None) -> str | None:
    """Where a stage job's blocks and results go (`scratch`, else the options'
    temp_location; None: the FnApiRunner's own default), once `options` are found sound.

    A ConfigError, before anything runs, for an option Beam's Python SDK does not know that
    is a likely typo (one of its own options is close) or any it does not know on the
    FnApiRunner (Beam would log that it discards it and run without it), and for another
    runner without a location its workers and this driver both reach. On another runner an
    option of no close name goes on, as Beam passes it on (a Java-side Flink or Spark option).
    """
    local = on_fn_api_runner(options)
    known = PipelineOptions([]).get_all_options()
    given = PipelineOptions(options).get_all_options(retain_unknown_options=True)
    for name in [n for n in given if n not in known]:
        close = difflib.get_close_matches(name, known, n=1)
        if close:
            raise ConfigError(f"runner beam: Beam has no option {name!r}; did you mean "
                              f"{close[0]!r} (`--beam-option {close[0]}=…`)?")
        if local:
            raise ConfigError(
                f"runner beam: Beam has no option {name!r}, and its FnApiRunner would run "
                "without it. An option of another runner goes with that runner: "
                "`--beam-option runner=FlinkRunner` (docs/how-to/beam.md).")
    where = scratch or given.get("temp_location")
    if not where and not local:
        raise ConfigError(
            "runner beam: a Beam runner other than the FnApiRunner needs a location that "
            "its workers and this driver both reach, for the blocks and their results. "
            "Give it as Beam's temp_location: `--beam-option temp_location=URL` on the "
            "command line, `--temp_location=URL` among the options in Python (gs://…, "
            "s3://…, hdfs://…).")
    return where.rstrip("/") if where else None
