"""The method registry: each method declares once, next to its algorithm, its name, needs, options and builder."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from torch import nn

from fedpref.algorithms.base import Algorithm
from fedpref.config import ExperimentConfig, build_config, option_help
from fedpref.errors import ConfigError
from fedpref.protocol import ClientInfo, State

# (config, trained clients, initial adapter state, the reward model) -> the server algorithm; the model is for
# methods whose initialization depends on the backbone (Soft-FL's orthogonal adapters, FedVPA-GP's latent heads).
Builder = Callable[[ExperimentConfig, list[ClientInfo], State, nn.Module], Algorithm]

# A rule a method declares on the config: (config, number of trained clients, None before the data loads) ->
# what is wrong, one phrase naming the key, or None. check_method_rules runs every method's rules.
Rule = Callable[[ExperimentConfig, int | None], str | None]

# The modules of fedpref.algorithms that declare methods (a module-level SPECS tuple), in the order the help
# and the error messages list their methods. A new method is its own module plus one entry here.
METHOD_MODULES = ("local", "centralized", "fedavg", "fl_target", "fedgd", "fedbiscuit", "soft_fl", "fedvpa", "fedavgm")


@dataclass(frozen=True)
class MethodSpec:
    """What the rest of fedpref knows of a method: the config, `--help`, the engines and the checks read it."""

    name: str  # as in algorithm.methods and the papers' tables; the built algorithm's `name`
    build: Builder
    help: str  # one line for `fedpref run --help`
    centralized: bool = False  # pools raw data (a reference point, not federated): in-process engine only
    multi_model: bool = False  # keeps K = algorithm.num_models models, so needs K <= the number of clients
    variational: bool = False  # a latent-conditioned selector (FedVPA-GP family), evaluated after the rounds
    options: type | None = None  # a dataclass of the method's own options: [algorithm.options.NAME]
    # ... or, for a family of methods that share one options table (FedVPA-GP's: [variational]), that table's name
    options_table: str = ""
    client_dp: bool = False  # its server step is a mean of client updates: [privacy] (client-level DP) applies
    secure_sum: bool = False  # ... a weighted sum of the round's updates: [secure_aggregation] (SecAgg+) applies
    checks: tuple[Rule, ...] = ()  # the method's own rules on the config (beyond those its flags imply)
    paper: str = ""  # whose method it is; empty: its module's PAPER

    def rules(self) -> tuple[Rule, ...]:
        """Every rule the method declares: the multi-model one its flag implies, then its own `checks`."""
        return ((models_fit_clients,) if self.multi_model else ()) + self.checks


def models_fit_clients(cfg: ExperimentConfig, clients: int | None) -> str | None:
    """The multi-model methods' rule: K = algorithm.num_models models need K <= the number of clients."""
    if clients is not None and cfg.algorithm.num_models > clients:
        return f"{clients} client(s), fewer than algorithm.num_models = {cfg.algorithm.num_models}"
    return None


def methods() -> dict[str, MethodSpec]:
    """Every method by name, in METHOD_MODULES order."""
    specs: dict[str, MethodSpec] = {}
    for module in METHOD_MODULES:
        declared = importlib.import_module(f"{__package__}.{module}")
        for spec in declared.SPECS:
            spec = spec if spec.paper else replace(spec, paper=getattr(declared, "PAPER", ""))
            if spec.name in specs:
                raise ValueError(f"method '{spec.name}' is declared twice (fedpref.algorithms.{module})")
            specs[spec.name] = spec
    return specs


def method_spec(name: str) -> MethodSpec:
    specs = methods()
    if name not in specs:
        raise ConfigError(f"method '{name}' is not implemented yet (available: {', '.join(specs)})")
    return specs[name]


def names(**flags: bool) -> list[str]:
    """The methods whose flags have the given values, e.g. names(centralized=True) -> ['CL', 'Multi-CL']."""
    return [s.name for s in methods().values() if all(getattr(s, flag) == value for flag, value in flags.items())]


def method_options(cfg: ExperimentConfig, name: str, source: str = "<config>") -> Any:
    """The method's options: its `options` dataclass from [algorithm.options.NAME] over the defaults, or its
    family's table (`options_table`; None when it declares none); a wrong key, type or value is a one-line
    ConfigError."""
    spec, raw = method_spec(name), cfg.algorithm.options.get(name, {})
    key = f"algorithm.options.{name}"
    if spec.options_table:
        if raw:
            raise ConfigError(f"{source}: '{key}': {name}'s options are the [{spec.options_table}] table")
        return getattr(cfg, spec.options_table)
    if spec.options is None:
        if raw:
            raise ConfigError(f"{source}: '{key}': {name} has no options")
        return None
    try:
        return build_config(spec.options, raw, source, key + ".")
    except (TypeError, ValueError) as e:  # the options' own checks (__post_init__)
        raise ConfigError(f"{source}: '{key}': {e}") from None


def check_methods(cfg: ExperimentConfig, source: str = "<config>") -> None:
    """The config checks that need the registry, before any data or model loads: known method names, every
    method's own rules (check_method_rules; the client count is known here for synthetic data only), privacy
    and secure aggregation, and every [algorithm.options.NAME] table."""
    specs = methods()
    bad = [m for m in cfg.algorithm.methods if m not in specs]
    if bad:
        raise ConfigError(f"{source}: 'algorithm.methods' has unknown method(s) {bad}; choose from {', '.join(specs)}")
    check_method_rules(cfg, sum(cfg.data.group_sizes) if cfg.data.source == "synthetic" else None, source)
    if cfg.privacy.enabled and (no_dp := [m for m in cfg.algorithm.methods if not specs[m].client_dp]):
        able = ", ".join(s.name for s in specs.values() if s.client_dp)
        raise ConfigError(
            f"{source}: [privacy] is on, but {', '.join(no_dp)} cannot clip and noise its clients' updates "
            f"(client-level DP applies to {able}; see docs/flower.md)"
        )
    if cfg.secure_aggregation.enabled and (clear := [m for m in cfg.algorithm.methods if not specs[m].secure_sum]):
        able = ", ".join(s.name for s in specs.values() if s.secure_sum)
        raise ConfigError(
            f"{source}: [secure_aggregation] is on, but {', '.join(clear)} needs each client's update, not only "
            f"their sum (secure aggregation applies to {able}; see docs/flower.md)"
        )
    for name in cfg.algorithm.options:
        if name not in specs:
            raise ConfigError(f"{source}: 'algorithm.options.{name}' names no method; choose from {', '.join(specs)}")
        method_options(cfg, name, source)


def check_method_rules(cfg: ExperimentConfig, clients: int | None, source: str = "<config>") -> None:
    """Every rule the config's methods declare (MethodSpec.rules), with the number of trained clients once the
    data is known (None before); the first broken rule is one ConfigError naming every method that declares it."""
    broken: dict[str, list[str]] = {}
    for name in cfg.algorithm.methods:
        for rule in method_spec(name).rules():
            if problem := rule(cfg, clients):
                broken.setdefault(problem, []).append(name)
    if broken:
        problem, names_ = next(iter(broken.items()))
        named = all(name in problem for name in names_)  # a rule of one method may name it itself
        raise ConfigError(f"{source}: {problem}" + ("" if named else f" for {', '.join(names_)}"))


def build_algorithm(
    name: str,
    cfg: ExperimentConfig,
    infos: list[ClientInfo],
    init: State,
    model: nn.Module,
    held_out: Sequence[str] = (),
) -> Algorithm:
    """The method's server algorithm for the trained clients `infos`, with `held_out` (unseen) client ids
    that only take part in a final selection stage; an impossible setting is a one-line ConfigError."""
    spec = method_spec(name)
    try:
        algorithm = spec.build(cfg, infos, init, model)
    except ValueError as e:  # the algorithms check their arguments against the actual clients
        raise ConfigError(f"{name}: {e}") from None
    algorithm.held_out = list(held_out)
    return algorithm


_FLAG_WORDS = {"centralized": "pools data, in-process", "multi_model": "K models", "variational": "latent selector"}


def help_rows() -> list[tuple[str, str]]:
    """(name, help) of every method, then (key, help) of each of its options, for `fedpref run --help`."""
    rows = []
    for spec in methods().values():
        flags = [words for flag, words in _FLAG_WORDS.items() if getattr(spec, flag)]
        rows.append((spec.name, spec.help + (f" [{', '.join(flags)}]" if flags else "")))
        if spec.options_table:
            rows[-1] = (spec.name, rows[-1][1] + f"; options: [{spec.options_table}]")
        elif spec.options is not None:
            prefix = f"  algorithm.options.{spec.name}."
            rows += [(key, f"{text} (default {default})") for key, default, text in option_help(spec.options, prefix)]
    return rows
