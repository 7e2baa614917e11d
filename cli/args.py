"""Command-line numbers, checked where argparse reads them.

``--warmup -1``, ``--repeats 0``, ``--timeout nan``, ``--budget inf``, ``--seed`` with
forty digits: every number option of the command-line tools takes one of these as its
argparse ``type``, so a number out of its range is refused before anything starts, in a
message that names the option, the text given and the range ("argument --timeout: 'nan'
is not a number of seconds (write one above 0 and at most 86400)").

:class:`Parser` is argparse's parser whose error messages show the user's text literally
(argparse quotes an unknown argument as typed: an escape code in it would reach the
terminal).
"""
from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from engine.common.terminal import visible

#: Longest number text read (digits beyond it are no number a tool can use).
MAX_NUMBER_TEXT = 64


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose error line shows control characters of the
    user's text as escapes (:func:`engine.common.terminal.visible`)."""

    def error(self, message: str):  # noqa: D102 (argparse API)
        super().error(visible(message, keep_newlines=True))


def _shown(text: str) -> str:
    text = text if len(text) <= 40 else text[:40] + "…"
    return f"'{visible(text)}'"


@dataclass(frozen=True)
class WholeNumber:
    """An argparse ``type``: a whole number from ``low`` to ``high`` (both included).
    ``1e3`` and ``16.0`` are whole numbers; ``1.5``, ``nan`` and ``inf`` are not."""

    low: int
    high: int
    what: str = "whole number"

    def range_text(self) -> str:
        return f"a {self.what} from {self.low} to {self.high}"

    def __call__(self, text: str) -> int:
        raw = str(text).strip()
        if len(raw) > MAX_NUMBER_TEXT and raw.lstrip("+-").isdigit():
            raise argparse.ArgumentTypeError(
                f"{_shown(text)} is out of range (write {self.range_text()})")
        try:
            if len(raw) > MAX_NUMBER_TEXT:
                raise InvalidOperation
            value = Decimal(raw)
        except (InvalidOperation, ValueError):
            raise argparse.ArgumentTypeError(
                f"{_shown(text)} is not a number (write {self.range_text()})") from None
        if not value.is_finite():
            raise argparse.ArgumentTypeError(
                f"{_shown(text)} is not a {self.what} (write {self.range_text()})")
        if not self.low <= value <= self.high:
            raise argparse.ArgumentTypeError(
                f"{_shown(text)} is out of range (write {self.range_text()})")
        if value != value.to_integral_value():
            raise argparse.ArgumentTypeError(
                f"{_shown(text)} is not a {self.what} (write {self.range_text()})")
        return int(value)

    def __repr__(self) -> str:      # argparse names the type in some messages
        return self.what


@dataclass(frozen=True)
class Number:
    """An argparse ``type``: a finite number above ``low`` (or from it, with
    ``low_included``) and at most ``high``; ``unit`` names what it counts."""

    low: float
    high: float
    unit: str = "seconds"
    low_included: bool = False

    def range_text(self) -> str:
        if self.low_included:
            return f"one from {self.low:g} to {self.high:g}"
        return f"one above {self.low:g} and at most {self.high:g}"

    def __call__(self, text: str) -> float:
        raw = str(text).strip()
        try:
            if len(raw) > MAX_NUMBER_TEXT:
                raise ValueError
            value = float(raw)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{_shown(text)} is not {self.kind()} (write {self.range_text()})") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(
                f"{_shown(text)} is not {self.kind()} (write {self.range_text()})")
        if value > self.high or value < self.low or (value == self.low and not self.low_included):
            raise argparse.ArgumentTypeError(
                f"{_shown(text)} is out of range (write {self.range_text()})")
        return value

    def kind(self) -> str:
        return f"a number of {self.unit}"

    def __repr__(self) -> str:
        return f"number of {self.unit}"


@dataclass(frozen=True)
class Percent(Number):
    """An argparse ``type``: a percentage from ``low`` to ``high``, written ``0.5%`` or ``0.5``."""

    unit: str = "percentage"
    low_included: bool = True

    def range_text(self) -> str:
        return f"a percentage from {self.low:g} to {self.high:g}, such as 0.5%"

    def kind(self) -> str:
        return "a percentage"

    def __call__(self, text: str) -> float:
        return Number.__call__(self, str(text).strip().removesuffix("%"))

    def __repr__(self) -> str:
        return "percentage"
