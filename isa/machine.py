"""One description of a machine: its architecture, its build, its counters and its memory.

A :class:`Machine` is what a program runs on and what a bitstream implements:

* the **architecture**, :class:`~openvta.isa.Config`: the ISA's widths and buffer sizes,
  the queues and the bus, and machine v2's drain unit (its stages and each stage's
  operations, ``DRAIN_OPS``); a program file records it and every back end checks it;
* the **micro-architecture**, :class:`~openvta.isa.LeanBuild`: how the RTL is built
  (the GEMM core and the ALU folded over cycles, accumulator read ports, the two-cycle
  MUL, the micro-op stage, shared DMA readers, instruction words);
* the **counters** the hardware implements (:class:`~openvta.isa.counters.CounterSet`);
* the **memory** behind the bus: ``on-chip`` (an AXI RAM: block RAM on a board, the
  cocotb RAM in simulation), ``sdram`` (the ULX3S's SDR SDRAM behind the SoC's
  controller) or ``spram`` (the UP5K's single-port SPRAM).

The cycle model's :class:`~openvta.isa.Timing` is derived from it (:attr:`Machine.timing`),
the RTL elaborates it, and ``openvta compile``, ``run``, ``bitstream`` and ``dse`` take
one by preset name (:data:`MACHINES`) or as text (:func:`parse_machine`)::

    ulx3s
    small:LOG_EPI_BUFF_SIZE=12,DRAIN_STAGES=3,DRAIN_OPS=RSHR+SHR/ADD/CLIP,alu_ii=2,memory=sdram
    {"config": {...}, "build": {...}, "counters": "none", "memory": "sdram"}   (JSON, or a .json file)

>>> m = parse_machine("small:alu_ii=2,acc_ports=1,memory=sdram")
>>> m.timing.alu_vec_ii_cycles, m.timing.dram_beat_cycles
(3, 4)
>>> m.spec
'small:alu_ii=2,acc_ports=1,memory=sdram'
>>> parse_machine(m.to_json()) == m
True
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import DEFAULT_PRESET, ISA_KEYS, MACHINE_KEYS, PRESETS, V2_KEYS, Config, ConfigError
from .counters import CounterSet, counter_set
from .drain import DrainError, format_drain_ops, parse_drain_ops
from .timing import LeanBuild, Timing, check_fold, sdram_timing, spram_timing, timing_for

__all__ = ["Machine", "MACHINES", "MEMORIES", "machine", "parse_machine", "BUILD_KEYS"]

#: The memories a machine's bus may reach (see the module docstring), the first the default.
MEMORIES = ("on-chip", "sdram", "spram")
#: The keys of a machine's text besides the configuration's: the build's, ``counters`` and ``memory``.
BUILD_KEYS = (*(f.name for f in dataclasses.fields(LeanBuild)), "counters", "memory")
_CONFIG_KEYS = ISA_KEYS + MACHINE_KEYS + V2_KEYS


@dataclass(frozen=True)
class Machine:
    """A machine: configuration, build, counters and memory (see the module docstring).

    Raises
    ------
    ConfigError
        naming the field and the constraint it breaks (a fold that does not divide the
        tile, a memory or a counter set that does not exist).

    Examples
    --------
    >>> Machine(PRESETS["small"]).name, MACHINES["ulx3s"].memory, MACHINES["ulx3s-v2"].config.DRAIN_STAGES
    ('small', 'sdram', 5)
    """

    config: Config = field(default_factory=Config)
    build: LeanBuild = field(default_factory=LeanBuild)
    counters: CounterSet = CounterSet.ALL
    memory: str = MEMORIES[0]

    def __post_init__(self) -> None:
        if not isinstance(self.config, Config):
            raise ConfigError(f"a machine's config must be a Config, not {type(self.config).__name__}")
        if not isinstance(self.build, LeanBuild):
            raise ConfigError(f"a machine's build must be a LeanBuild, not {type(self.build).__name__}")
        try:
            object.__setattr__(self, "counters", counter_set(self.counters))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if self.memory not in MEMORIES:
            raise ConfigError(f"memory must be one of {', '.join(MEMORIES)}, not {self.memory!r}")
        try:  # the folds must divide the tile they fold
            check_fold(self.build.gemm_ii, self.config.BLOCK_OUT, "gemm_ii (the GEMM core's fold)", "BLOCK_OUT")
            check_fold(self.build.alu_ii, self.config.BATCH * self.config.BLOCK_OUT, "alu_ii (the ALU's fold)",
                       "BATCH·BLOCK_OUT")
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    # -- what is derived ---------------------------------------------------------------
    @property
    def timing(self) -> Timing:
        """What the cycle model charges this machine: the configuration's timing with the
        build's micro-op intervals and the memory's latencies."""
        timing = self.build.timing(timing_for(self.config))
        if self.memory == "sdram":
            return sdram_timing(self.config, timing)
        if self.memory == "spram":
            return spram_timing(self.config, timing)
        return timing

    @property
    def is_plain(self) -> bool:
        """The configuration alone: the full build, every counter, on-chip memory (what a
        program file records no machine for)."""
        return self == Machine(self.config)

    @property
    def name(self) -> str:
        """The preset this machine equals (:data:`MACHINES`), by its own name (``v2``, never
        its alias ``default``), or ``"custom"``."""
        return next((name for name, m in MACHINES.items() if name != DEFAULT_PRESET and m == self), "custom")

    @property
    def spec(self) -> str:
        """The machine as :func:`parse_machine` reads it: a preset's name, or the nearest
        preset with the keys that differ from it."""
        if self.name != "custom":
            return self.name
        named = ((name, m) for name, m in MACHINES.items() if name != DEFAULT_PRESET)
        base_name, base = min(named, key=lambda item: len(self._differences(item[1])))
        return f"{base_name}:{','.join(f'{k}={v}' for k, v in self._differences(base))}"

    def _differences(self, base: Machine) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for key in _CONFIG_KEYS:
            if getattr(self.config, key) != getattr(base.config, key):
                value = getattr(self.config, key)
                out.append((key, format_drain_ops(self.config) if key == "DRAIN_OPS" and value else str(value)))
        for f in dataclasses.fields(LeanBuild):
            if getattr(self.build, f.name) != getattr(base.build, f.name):
                out.append((f.name, str(getattr(self.build, f.name))))
        if self.counters != base.counters:
            out.append(("counters", self.counters.label))
        if self.memory != base.memory:
            out.append(("memory", self.memory))
        return out

    def replace(self, **changes: Any) -> Machine:
        """A copy with ``changes``: configuration keys, build options, ``counters``,
        ``memory`` (or whole ``config`` and ``build`` values)."""
        config_changes = {k: changes.pop(k) for k in list(changes) if k in _CONFIG_KEYS}
        build_changes = {k: changes.pop(k) for k in list(changes) if k in BUILD_KEYS[:-2]}
        unknown = sorted(set(changes) - {"config", "build", "counters", "memory"})
        if unknown:
            raise ConfigError(f"a machine has no key {unknown[0]!r} (keys: {', '.join([*_CONFIG_KEYS, *BUILD_KEYS])})")
        config = changes.pop("config", self.config)
        build = changes.pop("build", self.build)
        try:
            build = dataclasses.replace(build, **build_changes)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        return dataclasses.replace(self, config=config.replace(**config_changes) if config_changes else config,
                                   build=build, **changes)

    # -- plain data ----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The JSON object: ``config`` (:meth:`Config.to_dict`), ``build``
        (:meth:`LeanBuild.to_dict`), ``counters`` and ``memory``."""
        return {"config": self.config.to_dict(), "build": self.build.to_dict(), "counters": self.counters.label,
                "memory": self.memory}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> Machine:
        """Read :meth:`to_dict`'s object (``build``, ``counters`` and ``memory`` may be
        left out: the full build, every counter, on-chip memory)."""
        if not isinstance(values, Mapping):
            raise ConfigError(f"a machine must be a JSON object, not {type(values).__name__}")
        unknown = sorted(set(values) - {"config", "build", "counters", "memory"})
        if unknown:
            raise ConfigError(f"a machine has no entry {unknown[0]!r} (entries: config, build, counters, memory)")
        if "config" not in values:
            raise ConfigError("a machine needs its config")
        build = values.get("build", {})
        if not isinstance(build, Mapping):
            raise ConfigError(f"a machine's build must be a JSON object, not {type(build).__name__}")
        names = [f.name for f in dataclasses.fields(LeanBuild)]
        wrong = sorted(set(build) - set(names))
        if wrong:
            raise ConfigError(f"a machine's build has no option {wrong[0]!r} (options: {', '.join(names)})")
        try:
            lean = LeanBuild(**build)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"a machine's build: {exc}") from None
        return cls(Config.from_dict(values["config"]), lean, values.get("counters", "all"),
                   values.get("memory", MEMORIES[0]))

    @classmethod
    def from_json(cls, text: str) -> Machine:
        try:
            values = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"machine is not valid JSON: {exc}") from None
        return cls.from_dict(values)


#: The named machines: one per configuration preset (the full build, every counter,
#: on-chip memory), and the board machines:
#:
#: ``ulx3s``
#:     what ``make bitstream-ecp5-sdram`` puts on the ULX3S (ECP5-85F): ``small`` with the
#:     lean compute unit that routes above 50 MHz, no hardware counters, and its DRAM on the
#:     board's 64 MiB SDRAM.
#: ``ulx3s-v2``
#:     the same with machine v2's drain unit: five stages, one operation each, the epilogue
#:     of ``compile_model``'s default (``fixed``) requantization of a convolution or dense
#:     layer (``ADD/SHR/MUL/RSHR/CLIP``: the bias, the pre-shift, the multiplier, the
#:     rounding shift, the clip; a residual block's longer epilogue stays on the ALU).  Its
#:     image does not route on the ECP5-85F yet (docs/FPGA_NOTES.md).
MACHINES: dict[str, Machine] = {name: Machine(cfg) for name, cfg in PRESETS.items()}
MACHINES["ulx3s"] = Machine(PRESETS["small"], LeanBuild(alu_ii=2, acc_ports=1, mul_cycles=2, uop_stage=1),
                            CounterSet.NONE, "sdram")
MACHINES["ulx3s-v2"] = MACHINES["ulx3s"].replace(LOG_EPI_BUFF_SIZE=12, DRAIN_STAGES=5,
                                                 DRAIN_OPS=parse_drain_ops("ADD/SHR/MUL/RSHR/CLIP"))


def machine(name: str) -> Machine:
    """The named machine (:data:`MACHINES`)."""
    try:
        return MACHINES[name]
    except KeyError:
        raise ConfigError(f"machine must be one of {', '.join(MACHINES)}, not {name!r}") from None


def parse_machine(text: str | Machine | Config) -> Machine:
    """The machine ``text`` describes: a preset's name (:data:`MACHINES`); a preset with
    changes, ``PRESET:KEY=VALUE,…`` (a key of :class:`Config` — ``DRAIN_OPS`` also by
    name, ``RSHR+SHR/ADD/CLIP`` — of :class:`LeanBuild`, ``counters`` or ``memory``); a
    JSON object (:meth:`Machine.to_dict`); or the path of a ``.json`` file holding one.
    A :class:`Machine` is returned as it is, a :class:`Config` as its plain machine.

    Raises
    ------
    ConfigError
        one line naming what is wrong: an unknown preset or key, a value out of range,
        a file that cannot be read.
    """
    if isinstance(text, Machine):
        return text
    if isinstance(text, Config):
        return Machine(text)
    if not isinstance(text, str):
        raise ConfigError(f"a machine is a preset's name, PRESET:KEY=VALUE,… or JSON, not {type(text).__name__}")
    stripped = text.strip()
    if stripped.startswith("{"):
        return _tagged(text, lambda: Machine.from_json(stripped))
    if stripped.endswith(".json"):
        try:
            content = Path(stripped).read_text()
        except OSError as exc:
            raise ConfigError(f"machine file {stripped}: {exc.strerror or exc}") from None
        return _tagged(stripped, lambda: Machine.from_json(content))
    name, _, rest = stripped.partition(":")
    base = machine(name.strip())
    changes: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in rest.split(","))):
        key, eq, value = (part.strip() for part in item.partition("="))
        if not eq or key not in (*_CONFIG_KEYS, *BUILD_KEYS):
            raise ConfigError(f"machine {text!r}: {item!r} is not KEY=VALUE with a key of "
                              f"{', '.join([*_CONFIG_KEYS, *BUILD_KEYS])}")
        changes[key] = _value(text, key, value)
    return _tagged(text, lambda: base.replace(**changes))


def _value(text: str, key: str, value: str) -> Any:
    if key in ("counters", "memory"):
        return value
    try:
        return int(value)
    except ValueError:
        if key == "DRAIN_OPS":
            try:  # the stages' operation sets by name
                return parse_drain_ops(value)
            except DrainError as exc:
                raise ConfigError(f"machine {text!r}: {exc}") from None
        raise ConfigError(f"machine {text!r}: {key} must be an integer, not {value!r}") from None


def _tagged(text: str, make: Any) -> Machine:
    try:
        built: Machine = make()
    except ConfigError as exc:
        message = str(exc)
        raise ConfigError(message if message.startswith("machine") else f"machine {text.strip()!r}: {message}") \
            from None
    return built
