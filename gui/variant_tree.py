"""The kernel picker: variants of a backend as a checkable tree, built from the registry.

Top-level rows are variants (checkbox, name, one-line technique; the tooltip adds the
kernel file's ``summary``, the longer story); under each, one row per parameter with its
values as checkboxes (the tooltip: the parameter's one-line description).  Choices are remembered per variant
name, so switching backend and back keeps them.  A parameter the user has not chosen
values for shows its default on the chosen device's architecture
(:meth:`engine.kernels.registry.Variant.default_params`), and follows the device when it changes.

Before the user chooses, a short first run is ticked (:func:`engine.kernels.registry.ticked_by_default`:
the kernel files' ``newcomer`` flag, cuBLAS, a dispatch line, the user's kernels).  A ticked
variant or parameter value that fits none of the chosen sizes (its constraints, the dtype)
is marked "not for these sizes" with the reason; a run leaves such pairs out
(:attr:`engine.run.runner.Plan.only_fitting`), so it makes no "skipped" rows.  A variant
this Python cannot run on the backend at all (a Triton ``.py`` kernel without Triton, or
on CUDA without the torch its driver needs) is marked "unavailable" with the reason.
"""
from __future__ import annotations

import html
import itertools
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (QCheckBox, QHBoxLayout, QHeaderView, QTreeWidget,
                               QTreeWidgetItem, QWidget)

from engine.kernels import registry
from engine.kernels.kernel_file import shown_text
from engine.measure import triton_kernels
from engine.run.runner import Fit, expand_items, item_fit

NAME_COL, INFO_COL = 0, 1
#: Item data: a heading row's role, a problem row's file path.
HEADING_ROLE = Qt.ItemDataRole.UserRole + 1
PROBLEM_ROLE = Qt.ItemDataRole.UserRole + 2
#: Roles that get a heading row above their first variant: (title, tooltip).
HEADINGS = {
    "experiment": ("Experiments", "Kernels kept for their story: tested, not in default sweeps"),
    "user": ("User kernels", "Your kernel files (File ▸ Add kernel folder…; Kernel ▸ New kernel…)"),
}
#: The kernel files whose problems a backend's tree shows (a Triton .py file runs on cuda,
#: and on cpu through Triton's interpreter).
BACKEND_SUFFIXES = {"cuda": (".cu", ".py"), "opencl": (".cl",), "cpu": (".py",)}
ERROR_COLOR = "#d03030"
#: A ticked variant that fits none of the chosen sizes: said, not run.
NOT_FOR_SIZES = "not for these sizes"
NOT_FOR_SIZES_COLOR = "#b36b00"
#: A variant this Python cannot run on the backend (whatever the sizes): said, with why.
UNAVAILABLE = "unavailable"


class ParamValues(QWidget):
    """A row of checkboxes, one per value a parameter may take."""

    toggled = Signal()

    def __init__(self, values: tuple[int, ...], checked: set[int], parent=None, tip: str = ""):
        super().__init__(parent)
        # the parameter's description: what each value box without a tip of its own shows
        self.setToolTip(tip)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(2, 0, 2, 0)
        layout.setSpacing(10)
        self.boxes: dict[int, QCheckBox] = {}
        for v in sorted(values):  # numeric order reads better than registry order (auto first)
            box = QCheckBox(registry.value_text(v))
            if v == registry.AUTO:
                box.setToolTip("the value the shape picks (the kernel file's [chosen]): each "
                               "size runs the one its header says is right for it"
                               + (f"<br>{tip}" if tip else ""))
            box.setChecked(v in checked)
            box.toggled.connect(self.toggled)
            layout.addWidget(box)
            self.boxes[v] = box
        layout.addStretch(1)
        self._tips = {v: b.toolTip() for v, b in self.boxes.items()}
        #: value → why it fits none of the chosen sizes (marked: struck out, the reason shown)
        self.marks: dict[int, str] = {}

    def set_marks(self, marks: dict[int, str]) -> None:
        """Strike out the values that fit none of the chosen sizes; ``marks``: value → what
        does not fit and why (``not for these sizes: ...``)."""
        self.marks = dict(marks)
        for v, b in self.boxes.items():
            why = marks.get(v)
            font = b.font()
            font.setStrikeOut(why is not None)
            b.setFont(font)
            tip = self._tips[v] or self.toolTip()
            if why is not None:
                tip = (html.escape(shown_text(why))
                       + (f"<br>{tip}" if tip else ""))
            b.setToolTip(tip if why is not None else self._tips[v])

    def checked(self) -> list[int]:
        return [v for v, b in self.boxes.items() if b.isChecked()]

    def set_checked(self, values) -> None:
        values = set(values)
        for v, b in self.boxes.items():
            b.setChecked(v in values)


class VariantTree(QTreeWidget):
    """Checkable variants and parameter values for one backend.

    Signals
    -------
    choice_changed()
        A variant or a parameter value was (un)checked.
    """

    choice_changed = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setColumnCount(2)
        self.setHeaderLabels(["Variant", "Technique"])
        self.setRootIsDecorated(True)
        self.setUniformRowHeights(True)
        self.setAlternatingRowColors(True)
        self.setSelectionMode(QTreeWidget.SelectionMode.SingleSelection)
        self.header().setStretchLastSection(True)
        self.header().setSectionResizeMode(NAME_COL, QHeaderView.ResizeMode.ResizeToContents)
        self.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.backend = ""
        #: The chosen device's architecture (``sm_90``): whose default parameters show.
        self.arch: str | None = None
        # Remembered across backends: variant → checked, variant → {param: values}; only
        # the values the user chose (the others are the defaults on ``arch``).
        self._checked: dict[str, bool] = {}
        self._values: dict[str, dict[str, list[int]]] = {}
        self._value_widgets: dict[tuple[str, str], ParamValues] = {}
        self._building = False
        self._user_folders: list[str] = []
        self._user_problems: list[tuple[str, str]] = []
        #: What the variants tick before the user chooses (settings saved before the
        #: newcomer defaults keep ``ALL``: their choices stay as they were).
        self.ticks = registry.Ticks.NEWCOMER
        #: The sizes and dtype a run would take: what the marks are worked out for.
        self._shapes: list[tuple[int, int, int]] = []
        self._dtype = registry.DTYPES[0]
        self._layout = "kn"
        #: variant → its items' fits at the chosen sizes (ticked variants only)
        self._fits: dict[str, list[tuple[dict[str, int], Fit]]] = {}
        self._tips: dict[str, str] = {}      # variant → its row's tooltip without a mark
        self.itemChanged.connect(self._item_changed)

    # --- building ----------------------------------------------------------------------

    def set_backend(self, backend: str) -> None:
        """Show the variants that have a kernel for ``backend``."""
        self.backend = backend
        self._building = True
        try:
            self.clear()
            self._value_widgets.clear()
            headed: set[str] = set()
            for v in registry.variants_for(backend):
                if v.role in HEADINGS and v.role not in headed:
                    headed.add(v.role)
                    self._add_heading(v.role)
                item = QTreeWidgetItem([v.name, v.technique])
                item.setData(NAME_COL, Qt.ItemDataRole.UserRole, v.name)
                item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
                ticked = self._checked.get(v.name, self._ticked_by_default(v))
                item.setCheckState(NAME_COL, Qt.CheckState.Checked if ticked
                                   else Qt.CheckState.Unchecked)
                tip = variant_tip(v)
                item.setToolTip(NAME_COL, tip)
                item.setToolTip(INFO_COL, tip)
                self._tips[v.name] = tip
                self.addTopLevelItem(item)
                chosen = self._values.get(v.name, {})
                defaults = v.default_params(self.arch)
                for pname, values in v.space.items():
                    child = QTreeWidgetItem([pname, ""])
                    child.setFlags(Qt.ItemFlag.ItemIsEnabled)
                    if pname in v.chosen:     # the shape picks it unless values are ticked
                        values = (registry.AUTO, *values)
                        note = (f"auto (the default): the shape picks it, "
                                f"{pname} = {v.chosen[pname].text}")
                    else:
                        note = _default_note(defaults[pname], values[0], self.arch)
                    ptip = param_tip(v, pname, note)
                    child.setToolTip(NAME_COL, ptip)
                    item.addChild(child)
                    checked = set(chosen.get(pname, [_initial(v, pname, defaults)]))
                    w = ParamValues(values, checked, tip=ptip)
                    w.toggled.connect(lambda n=v.name, p=pname: self._values_changed(n, p))
                    self.setItemWidget(child, INFO_COL, w)
                    self._value_widgets[(v.name, pname)] = w
                item.setExpanded(bool(v.space))
            if "user" not in headed:
                self._add_heading("user")
            for path, message in self._user_problems:
                if Path(path).suffix not in BACKEND_SUFFIXES.get(backend, (Path(path).suffix,)):
                    continue
                # shown_text: a file name or message may hold escape codes, or bytes that
                # are not UTF-8 (lone surrogates Qt cannot take)
                row = QTreeWidgetItem([shown_text(Path(path).name), shown_text(message)])
                row.setFlags(Qt.ItemFlag.ItemIsEnabled)
                row.setForeground(NAME_COL, QBrush(QColor(ERROR_COLOR)))
                row.setForeground(INFO_COL, QBrush(QColor(ERROR_COLOR)))
                row.setToolTip(NAME_COL, html.escape(shown_text(f"{path}: {message}")))
                row.setToolTip(INFO_COL, html.escape(shown_text(f"{path}: {message}")))
                row.setData(NAME_COL, PROBLEM_ROLE, str(path))
                self.addTopLevelItem(row)
            if not any(v.role == "user" for v in registry.variants_for(backend)) \
                    and not self._user_problems:
                hint = QTreeWidgetItem(["", "None yet: Kernel ▸ New kernel from template…, "
                                            "or add a folder of kernel files"])
                hint.setFlags(Qt.ItemFlag.ItemIsEnabled)
                hint.setForeground(INFO_COL, self.palette().placeholderText())
                self.addTopLevelItem(hint)
        finally:
            self._building = False
        self._refresh_marks()
        self.choice_changed.emit()

    def set_context(self, shapes, dtype: str, layout: str = "kn") -> None:
        """The sizes, dtype and B's layout a run would take: ticked variants and values
        that fit none of them are marked (:meth:`mark`)."""
        shapes, dtype, layout = [tuple(s) for s in shapes], str(dtype), str(layout)
        if (shapes, dtype, layout) == (self._shapes, self._dtype, self._layout):
            return
        retick = dtype != self._dtype
        self._shapes, self._dtype, self._layout = shapes, dtype, layout
        if retick:
            self._tick_defaults()
        self._refresh_marks()

    def _ticked_by_default(self, v) -> bool:
        """Whether ``v`` is ticked while the user has not chosen, on this backend, device
        and input type (:func:`engine.kernels.registry.ticked_by_default`)."""
        return registry.ticked_by_default(v, self.backend, self.ticks, self.arch, self._dtype)

    def _tick_defaults(self) -> None:
        """The variants the user has not (un)ticked take the defaults of the run's input
        type (:func:`engine.kernels.registry.ticked_by_default`): choosing bfloat16 ticks
        the 16-bit lines in place of FP32 ones that would only be skips."""
        self._building = True
        try:
            for it in self._top_items():
                name = it.data(NAME_COL, Qt.ItemDataRole.UserRole)
                if not name or name in self._checked:
                    continue
                on = self._ticked_by_default(registry.get(name))
                it.setCheckState(NAME_COL, Qt.CheckState.Checked if on else Qt.CheckState.Unchecked)
        finally:
            self._building = False
        # no choice_changed here: set_context's caller (the panel's _changed) updates after it

    def set_arch(self, arch: str | None) -> None:
        """The chosen device's architecture (``sm_90``, or None): parameters the user has
        not chosen values for show its defaults."""
        arch = registry.arch_name(arch)
        if arch == self.arch:
            return
        self.arch = arch
        if self.backend:
            self.set_backend(self.backend)

    def _add_heading(self, role: str) -> None:
        title, tip = HEADINGS[role]
        if role == "user" and self._user_folders:
            tip += "<br>" + "<br>".join(html.escape(shown_text(f)) for f in self._user_folders)
        head = QTreeWidgetItem([title, ""])
        head.setFlags(Qt.ItemFlag.ItemIsEnabled)
        font = head.font(NAME_COL)
        font.setBold(True)
        head.setFont(NAME_COL, font)
        head.setToolTip(NAME_COL, tip)
        head.setData(NAME_COL, HEADING_ROLE, role)
        self.addTopLevelItem(head)
        head.setFirstColumnSpanned(True)

    def set_user_kernels(self, folders, problems) -> None:
        """Show the user kernel ``folders`` (in the heading's tooltip) and the files
        that could not be read, ``[(path, message)]``, as rows under the heading."""
        self._user_folders = [str(f) for f in folders]
        self._user_problems = [(str(p), str(m)) for p, m in problems]
        if self.backend:
            self.set_backend(self.backend)

    def headings(self) -> list[str]:
        """The section headings shown, top to bottom (for tests and the curious)."""
        return [it.text(NAME_COL) for it in self._all_rows() if it.data(NAME_COL, HEADING_ROLE)]

    def problem_rows(self) -> list[tuple[str, str]]:
        """``(path, message)`` of the kernel files shown as unusable."""
        return [(it.data(NAME_COL, PROBLEM_ROLE), it.text(INFO_COL)) for it in self._all_rows()
                if it.data(NAME_COL, PROBLEM_ROLE)]

    def _all_rows(self):
        for i in range(self.topLevelItemCount()):
            yield self.topLevelItem(i)

    def _item_changed(self, item: QTreeWidgetItem, column: int) -> None:
        if self._building or column != NAME_COL:
            return
        name = item.data(NAME_COL, Qt.ItemDataRole.UserRole)
        if name:
            self._checked[name] = item.checkState(NAME_COL) == Qt.CheckState.Checked
            self._refresh_marks([name])
            self.choice_changed.emit()

    def _values_changed(self, name: str, pname: str) -> None:
        if self._building:
            return
        self._values.setdefault(name, {})[pname] = self._value_widgets[(name, pname)].checked()
        self._refresh_marks([name])
        self.choice_changed.emit()

    # --- fitting the chosen sizes ---------------------------------------------------------

    def _refresh_marks(self, names=None) -> None:
        """Work out again where the ticked variants ``names`` (default: all) run, and mark
        the rows and values that fit none of the chosen sizes."""
        if self._building:
            return
        checked = set(self.checked_variants())
        rows = {it.data(NAME_COL, Qt.ItemDataRole.UserRole): it for it in self._top_items()}
        if names is None:
            self._fits.clear()
        for name in (rows if names is None else names):
            item = rows.get(name)
            if item is None:
                continue
            self._fits.pop(name, None)
            if name in checked and self._shapes:
                self._fits[name] = [
                    (p, item_fit(self.backend, name, p, self._shapes, self._dtype, self._layout))
                    for _, p in expand_items(self.backend, [name], self.chosen_values(name))]
            self._show_mark(name, item)

    def _show_mark(self, name: str, item: QTreeWidgetItem) -> None:
        v = registry.get(name)
        mark = self.mark(name)
        nowhere = mark.startswith(UNAVAILABLE) or self._nowhere(name)
        # "not for these sizes: why" instead of the technique (in its tooltip still);
        # "at 2 of 6 sizes" before it
        item.setText(INFO_COL, mark if nowhere else f"{mark} · {v.technique}" if mark
                     else v.technique)
        if nowhere:
            item.setForeground(INFO_COL, QBrush(QColor(NOT_FOR_SIZES_COLOR)))
        else:
            item.setData(INFO_COL, Qt.ItemDataRole.ForegroundRole, None)
        tip = self._tips.get(name, "")
        item.setToolTip(INFO_COL, tip + (f"<br><br>{html.escape(mark)}" if mark else ""))
        fits = self._fits.get(name)
        for pname in v.space:
            w = self._value_widgets.get((name, pname))
            if w is not None:
                w.set_marks(self._value_marks(name, pname, fits) if fits is not None else {})

    def _value_marks(self, name: str, pname: str, fits) -> dict[int, str]:
        """Values of ``pname`` that, with the other parameters as chosen, fit none of the
        sizes: value → ``not for these sizes: why`` (at the first size; or ``not in
        float16: why``, as :meth:`mark`)."""
        chosen = self.chosen_values(name)
        if any(not vals for p, vals in chosen.items() if p != pname):
            return {}
        out: dict[int, str] = {}
        for value in self._value_widgets[(name, pname)].boxes:
            if value in chosen[pname]:        # already worked out: its items' fits
                mine = [f for p, f in fits if p[pname] == value]
            else:
                others = [[(p, x) for x in chosen[p]] if p != pname else [(p, value)]
                          for p in chosen]
                mine = [item_fit(self.backend, name, dict(c), self._shapes, self._dtype, self._layout)
                        for c in itertools.product(*others)]
            if mine and all(f.nowhere for f in mine):
                out[value] = f"{mine[0].misfit}: {mine[0].reason or ''}"
        return out

    def mark(self, name: str) -> str:
        """What the row of a ticked variant says about the chosen sizes: ``not for these
        sizes: why`` where none of its items fits any, ``at 2 of 6 sizes`` where they fit
        some; empty where it runs at all of them (or is not ticked). ``unavailable: why``,
        ticked or not, where this Python cannot run it on the backend."""
        why = self.unavailable(name)
        if why:
            return f"{UNAVAILABLE}: {shown_text(why, 300)}"
        fits = self._fits.get(name)
        if not fits:
            return ""
        if self._nowhere(name):
            return f"{fits[0][1].misfit}: {shown_text(fits[0][1].reason or '', 300)}"
        runs = {s for _, f in fits for s in f.runs}
        if len(runs) < len(self._shapes):
            return f"at {len(runs)} of {len(self._shapes)} sizes"
        return ""

    def _nowhere(self, name: str) -> bool:
        """A ticked variant none of whose items runs at any chosen size."""
        fits = self._fits.get(name)
        return bool(fits) and all(f.nowhere for _, f in fits)

    def unavailable(self, name: str) -> str | None:
        """Why ``name`` cannot run on the tree's backend in this Python (a Triton kernel
        without Triton, or on CUDA without torch), or None."""
        v = registry.REGISTRY.get(name)
        if v is None or not v.is_triton:
            return None
        return triton_kernels.backend_problem(self.backend)

    def value_marks(self, name: str, pname: str) -> dict[int, str]:
        """The values of ``pname`` marked as fitting none of the chosen sizes: value → why."""
        w = self._value_widgets.get((name, pname))
        return dict(w.marks) if w is not None else {}

    def fitting_runs(self) -> int:
        """Runs of the ticked items at the chosen sizes that fit (those a run makes)."""
        return sum(len(f.runs) for fits in self._fits.values() for _, f in fits)

    # --- queries --------------------------------------------------------------------

    def _top_items(self):
        """The variant rows (headings and problem rows are not variants)."""
        for i in range(self.topLevelItemCount()):
            it = self.topLevelItem(i)
            if it.data(NAME_COL, Qt.ItemDataRole.UserRole):
                yield it

    def variant_names(self) -> list[str]:
        return [it.data(NAME_COL, Qt.ItemDataRole.UserRole) for it in self._top_items()]

    def checked_variants(self) -> list[str]:
        return [it.data(NAME_COL, Qt.ItemDataRole.UserRole) for it in self._top_items()
                if it.checkState(NAME_COL) == Qt.CheckState.Checked]

    def chosen_values(self, name: str) -> dict[str, list[int]]:
        v = registry.get(name)
        chosen = self._values.get(name, {})
        defaults = v.default_params(self.arch)
        return {p: list(chosen.get(p, [_initial(v, p, defaults)])) for p in v.space}

    def problems(self) -> list[str]:
        """Why the current choice cannot run, as short sentences (empty: fine)."""
        names = self.checked_variants()
        if not names:
            return ["Choose at least one variant."]
        out = []
        for name in names:
            for p, vals in self.chosen_values(name).items():
                if not vals:
                    out.append(f"{name}: choose at least one value of {p}.")
        if not out and self._shapes and self._fits and not self.fitting_runs():
            out.append(f"{names[0]}: {self.mark(names[0]).split(':')[0]}; tick another variant or "
                       "choose other sizes or types."
                       if len(names) == 1 else
                       f"None of the ticked variants is for these sizes ({self.mark(names[0])}).")
        return out

    def plan_items(self) -> list[tuple[str, dict[str, int]]]:
        """(variant, params) pairs for the runner, each variant with its own values."""
        items: list[tuple[str, dict[str, int]]] = []
        for name in self.checked_variants():
            items.extend(expand_items(self.backend, [name], self.chosen_values(name)))
        return items

    # --- changing -------------------------------------------------------------------

    def set_variant_checked(self, name: str, checked: bool) -> None:
        self._checked[name] = checked
        for it in self._top_items():
            if it.data(NAME_COL, Qt.ItemDataRole.UserRole) == name:
                it.setCheckState(NAME_COL, Qt.CheckState.Checked if checked else Qt.CheckState.Unchecked)

    def set_only(self, names) -> None:
        """Check exactly ``names`` among the shown variants."""
        names = set(names)
        for n in self.variant_names():
            self.set_variant_checked(n, n in names)

    def set_param_values(self, name: str, pname: str, values) -> None:
        self._values.setdefault(name, {})[pname] = sorted(values)
        w = self._value_widgets.get((name, pname))
        if w is not None:
            w.set_checked(values)

    def set_all(self, checked: bool) -> None:
        for n in self.variant_names():
            self.set_variant_checked(n, checked)

    # --- persistence -------------------------------------------------------------------

    def state(self) -> dict:
        """The checked variants and the values the user chose (``explicit``: parameters
        left out take the device's defaults; ``ticks``: what variants the user has not
        (un)ticked show, :class:`engine.kernels.registry.Ticks`)."""
        return {"checked": dict(self._checked),
                "values": {k: dict(v) for k, v in self._values.items() if v}, "explicit": True,
                "ticks": self.ticks.value}

    def set_state(self, state: dict) -> None:
        """Restore choices saved by :meth:`state`; unknown names and values are dropped.
        A state saved before ``explicit`` held every parameter of every variant shown,
        the untouched ones at their first value: those follow the device's defaults now.
        A state saved before ``ticks`` ticked every variant but the experiments: the
        variants it does not name still are (:attr:`Ticks.ALL <engine.kernels.registry.Ticks.ALL>`)."""
        checked = state.get("checked", {}) if isinstance(state, dict) else {}
        values = state.get("values", {}) if isinstance(state, dict) else {}
        explicit = isinstance(state, dict) and state.get("explicit") is True
        ticks = state.get("ticks") if isinstance(state, dict) else None
        self.ticks = (registry.Ticks(ticks) if isinstance(ticks, str)
                      and ticks in {t.value for t in registry.Ticks}
                      else registry.Ticks.ALL if isinstance(state, dict) and "checked" in state
                      else registry.Ticks.NEWCOMER)
        self._checked = {k: bool(v) for k, v in checked.items() if k in registry.REGISTRY}
        self._values = {}
        for name, pv in values.items():
            if name not in registry.REGISTRY or not isinstance(pv, dict):
                continue
            space = registry.REGISTRY[name].space
            chosen = {p: sorted(int(x) for x in vals if int(x) in space[p])
                      for p, vals in pv.items() if p in space and isinstance(vals, list)}
            if not explicit:
                chosen = {p: vals for p, vals in chosen.items() if vals != [space[p][0]]}
            if chosen:
                self._values[name] = chosen
        if self.backend:
            self.set_backend(self.backend)


def variant_tip(v: registry.Variant) -> str:
    """A variant row's tooltip: name and kind, the one-line title, then the longer story
    (the file's ``summary``) and where the technique comes from."""
    # a user's title is text, not HTML: "<b>" in it shows as written
    tip = f"<b>{v.name}</b> ({v.kind})<br>{html.escape(shown_text(v.technique))}"
    if v.summary:
        tip += f"<p>{html.escape(shown_text(v.summary))}</p>"
    else:
        tip += "<br>"
    tip += f"<i>{html.escape(shown_text(v.seed))}</i>"
    if v.role == "user":
        tip += "<br>" + "<br>".join(html.escape(shown_text(h.path)) for h in v.headers)
    return tip


def param_tip(v: registry.Variant, pname: str, note: str) -> str:
    """A parameter row's tooltip: its one-line description (the file's ``[descriptions]``),
    then which values the sweep takes and the default."""
    text = v.descriptions.get(pname)
    head = f"<b>{html.escape(pname)}</b>: {html.escape(shown_text(text))}<br>" if text else ""
    return f"{head}Values of {pname} to sweep for {v.name}; {html.escape(note)}"


def _initial(v, pname: str, defaults) -> int:
    """The value ticked before the user ticks any: auto for a parameter the shape picks
    (``[chosen]``), else the default on the device's architecture."""
    return registry.AUTO if pname in v.chosen else defaults[pname]


def _default_note(default: int, first: int, arch: str | None) -> str:
    """``16 is the default on sm_90 (8 elsewhere)`` or ``8 is the default``."""
    if default != first and arch:
        return f"{default} is the default on {arch} ({first} elsewhere)"
    return f"{default} is the default"
