"""Every printer: result tables, derivations as text, Markdown, LaTeX and JSON.

Objects delegate ``__str__``, ``_repr_markdown_``, ``_repr_latex_`` and
``_repr_html_`` to the functions here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sympy.printing.latex import LatexPrinter
from sympy.printing.str import StrPrinter

from .formatting import json_value, plain_number
from .units import format_value

# ---------------------------------------------------------------------------------
# Numbers
# ---------------------------------------------------------------------------------


def show(value: Any, unit: str) -> str:
    """A value with its unit in sensible prefixes: ``5.528 GB``, ``6.24 ms``."""
    return format_value(value, unit)


def show_quantity(result, name: str) -> str:
    """A quantity of ``result`` as printed: the outcome its headline's choices name
    (``compute``), else its value with its unit.
    """
    value = result.values[name]
    choice = result.graph.choice(name, value)
    return choice if choice is not None else show(value, result.graph[name].unit)


# ---------------------------------------------------------------------------------
# Formulas
# ---------------------------------------------------------------------------------


class _ValuesStrPrinter(StrPrinter):
    def __init__(self, values, **settings):
        super().__init__(settings)
        self._values = values

    def _print_Symbol(self, expr):
        if expr.name in self._values:
            return plain_number(self._values[expr.name])
        return super()._print_Symbol(expr)


def latex_name(name: str, display: str | None = None) -> str:
    if display:
        return display
    return r"\mathrm{" + name.replace("_", r"\_") + "}"


class _NamesLatexPrinter(LatexPrinter):
    r"""Names as ``\mathrm{...}`` (or their declared symbol), products with ``\cdot``.

    sympy juxtaposes factors by default, and ``\mathrm{a} \mathrm{b}`` renders as one
    word; an explicit multiplication sign keeps named factors apart.
    """

    def __init__(self, names, values=None, **settings):
        settings.setdefault("mul_symbol", "dot")
        super().__init__(settings)
        self._names = names
        self._values = values

    def _print_Symbol(self, expr, style="plain"):
        if self._values is not None and expr.name in self._values:
            text = plain_number(self._values[expr.name])
            if "e" in text and not text.startswith("-∞"):
                mantissa, exponent = text.split("e")
                return rf"{mantissa} \times 10^{{{exponent}}}"
            return text.replace("∞", r"\infty")
        return latex_name(expr.name, self._names.get(expr.name))


def as_written(expression):
    """``expression`` with nested unevaluated sums and products flattened, so that a
    formula a plugin wrote with ``sympy.evaluate(False)`` prints as written
    (``cost*1000000/(3600*rate*utilisation)``) without a bracket per operation. A sum
    whose first term is negative opens with its first positive one instead: sympy sorts
    the terms it builds, and ``-a + b`` reads worse than ``b - a``.

    >>> import sympy
    >>> a, b = sympy.symbols("a b")
    >>> formula_text(-a + 2 * b)
    '2*b - a'
    """
    import sympy

    if not getattr(expression, "args", ()):
        return expression
    args = [as_written(a) for a in expression.args]
    if isinstance(expression, (sympy.Mul, sympy.Add)):
        flat: list[Any] = []
        for arg in args:
            flat.extend(arg.args if type(arg) is type(expression) else [arg])
        if isinstance(expression, sympy.Add) and flat[0].could_extract_minus_sign():
            lead = next((i for i, a in enumerate(flat) if not a.could_extract_minus_sign()), 0)
            flat.insert(0, flat.pop(lead))
        if flat == list(expression.args):
            return expression
        return type(expression)(*flat, evaluate=False)
    if all(a is b for a, b in zip(args, expression.args)):
        return expression
    try:
        return expression.func(*args, evaluate=False)
    except TypeError:
        return expression.func(*args)


def formula_text(expression) -> str:
    return StrPrinter({"order": "none"}).doprint(as_written(expression))


def substituted_text(expression, values) -> str:
    return _ValuesStrPrinter(values, order="none").doprint(as_written(expression))


def formula_latex(expression, names=None) -> str:
    """The formula in LaTeX, terms in the order the expression holds them (sympy's
    default LaTeX order sorts them: ``- M + u - W`` for ``u - W - M``).
    """
    return _NamesLatexPrinter(names or {}, order="none").doprint(as_written(expression))


def substituted_latex(expression, values, names=None) -> str:
    return _NamesLatexPrinter(names or {}, values, order="none").doprint(as_written(expression))


def written(step):
    """A derived step's expression with its terms in the order its authors wrote them.

    sympy sorts the terms of a sum or product when it builds one, so a lever's
    ``wrap(name, lambda old: old - S.prefill_memory)`` is stored as
    ``-prefill_memory + ...``. Following the step's history puts each wrapped
    expression first and what the wrap added after it, as written; the result is the
    same expression (its terms only reordered, left unevaluated).

    >>> import sympy
    >>> from infermodel.quantity import Change
    >>> u, w, m = sympy.symbols("memory_usable weight_bytes prefill_memory")
    >>> history = (Change("define", "physics", u - w), Change("wrap", "lever", u - w - m))
    >>> formula_text(written(type("Step", (), {"history": history, "expression": u - w - m})))
    'memory_usable - weight_bytes - prefill_memory'
    """
    import sympy

    expression = step.expression
    if expression is None or not step.history or step.history[0].kind == "input":
        return expression
    shown, stored = step.history[0].expression, step.history[0].expression
    for change in step.history[1:]:
        new = change.expression
        if change.kind == "wrap" and isinstance(new, (sympy.Add, sympy.Mul)):
            shown = _follow(stored, shown, new)
        else:
            shown = new
        stored = new
    return shown if stored == expression else expression


def _follow(old, old_shown, new):
    """``new`` (a sum or product) with ``old``'s terms first, shown as ``old_shown``."""
    kind = type(new)
    rest = list(new.args)
    if isinstance(old, kind) and all(rest.count(a) >= list(old.args).count(a) for a in old.args):
        for arg in old.args:
            rest.remove(arg)
    elif old in rest:
        rest.remove(old)
    else:
        return new
    return kind(old_shown, *rest, evaluate=False)


#: Wider formulas (in characters as they render, roughly) are broken at their top-level
#: + and − into several lines: at 1,280 px a page's content is about this wide.
WRAP_WIDTH = 78


def latex_width(latex: str) -> int:
    r"""About how many characters wide ``latex`` renders: commands that print nothing
    themselves (``\mathrm``, ``\left``, braces) count nothing, other commands one, and a
    fraction as wide as the wider of its numerator and denominator.

    >>> latex_width(r"\mathrm{decode\_step\_time} \cdot 2")
    19
    >>> latex_width(r"\frac{\mathrm{decode\_bytes}}{\mathrm{BW}} = 1")
    15
    """
    import re

    at = latex.find(r"\frac{")
    if at >= 0:
        numerator, after = _braced(latex, at + len(r"\frac"))
        denominator, rest = _braced(latex, after)
        if numerator is not None and denominator is not None:
            return (latex_width(latex[:at]) + max(latex_width(numerator), latex_width(denominator))
                    + latex_width(latex[rest:]))
    text = re.sub(r"\\(mathrm|text|operatorname|left|right|mathit|mathbf|,|;|!)"
                  r"(?![A-Za-z])", "", latex)
    text = re.sub(r"\\(quad|qquad)(?![A-Za-z])", "  ", text)
    text = re.sub(r"\\[A-Za-z]+", "x", text)
    text = re.sub(r"\\(.)", r"\1", text)
    return len(re.sub(r"[{}^\s]", "", text)) + text.count(" ") // 2


def _braced(text: str, start: int) -> tuple[str | None, int]:
    """The group ``{...}`` opening at ``text[start]`` (its inside) and the index after it."""
    if start >= len(text) or text[start] != "{":
        return None, start
    depth = 0
    for index in range(start, len(text)):
        char = text[index]
        if char == "{" and text[index - 1] != "\\":
            depth += 1
        elif char == "}" and text[index - 1] != "\\":
            depth -= 1
            if depth == 0:
                return text[start + 1:index], index + 1
    return None, start


def _terms_latex(expression, names, values=None, width: int = WRAP_WIDTH) -> list[str]:
    """The formula in pieces a line may break between: the terms of a sum (each after
    the first with its sign) and, when one is wider than ``width``, the arguments of a
    ``max``/``min`` (between fixed-size brackets, which may span lines).
    """
    printer = _NamesLatexPrinter(names, values, order="none")
    return _pieces(as_written(expression), printer, width)


def _pieces(expression, printer, width: int) -> list[str]:
    import sympy

    text = printer.doprint(expression)
    if latex_width(text) <= width:
        return [text]
    if isinstance(expression, sympy.Add):
        out: list[str] = []
        for index, term in enumerate(expression.args):
            sign = "" if index == 0 else "+ "
            if index and term.could_extract_minus_sign():
                sign, term = "- ", -term
            if isinstance(term, sympy.Add):
                parts = [rf"\left({printer.doprint(term)}\right)"]
            else:
                parts = _pieces(term, printer, width)
            out += [sign + parts[0], *parts[1:]]
        return out
    if isinstance(expression, sympy.Mul) and _splittable_product(expression):
        out, before = [], []
        for factor in expression.args:
            if not isinstance(factor, sympy.Add):
                before.append(printer.doprint(factor))
                continue
            parts = _pieces(factor, printer, width)
            lead = " \\cdot ".join(before) + (" \\cdot " if before else "")
            out += [lead + r"\biggl(" + parts[0], *parts[1:]]
            out[-1] += r"\biggr)"
            before = []
        if before:
            out[-1] += " \\cdot " + " \\cdot ".join(before)
        return out
    if isinstance(expression, (sympy.Max, sympy.Min)):
        out = []
        arguments = list(expression.args)
        for index, argument in enumerate(arguments):
            parts = _pieces(argument, printer, width)
            if index < len(arguments) - 1:
                parts[-1] += ","
            out += parts
        name = r"\max" if isinstance(expression, sympy.Max) else r"\min"
        out[0] = name + r"\biggl(" + out[0]
        out[-1] += r"\biggr)"
        return out
    return [text]


def _splittable_product(expression) -> bool:
    """A product of plain factors and at least one sum, with no denominator or sign."""
    import sympy

    return (any(isinstance(f, sympy.Add) for f in expression.args)
            and not expression.could_extract_minus_sign()
            and not any(isinstance(f, sympy.Pow) and f.exp.is_negative for f in expression.args)
            and not any(f.is_Number and f != 1 and not f.is_Integer for f in expression.args))


def _wrapped(left: str, terms: list[str], tail: str, width: int) -> list[str]:
    """Aligned rows ``left &= ...``; a row that would pass ``width`` continues below."""
    rows, line = [], f"{left} &= {terms[0]}"
    for term in terms[1:]:
        if latex_width(line + " " + term) > width:
            rows.append(line)
            line = rf"&\quad {term}"
        else:
            line += " " + term
    if tail and latex_width(line + tail) > width and latex_width(line) > width // 2:
        rows.append(line)
        line = "&" + tail
    else:
        line += tail
    rows.append(line)
    return rows


def step_rows(step, values, names, width: int = WRAP_WIDTH) -> list[str]:
    r"""The aligned LaTeX rows of one step: the formula as written, then with numbers and
    the value (``\text{6.24 ms}``), each broken at top-level + and − when it is wider than
    ``width``. Join them with ``\\`` inside an ``aligned`` (or Sphinx's ``split``).
    """
    left = latex_name(step.name, names.get(step.name))
    if step.is_input:
        return [f"{left} &= {substituted_latex(_symbol(step.name), values, names)}"]
    expression = written(step)
    value = show(step.value, step.unit).replace("%", r"\%")
    room = max(width - latex_width(left) - 2, width // 2)
    formula = _wrapped(left, _terms_latex(expression, names, width=room), "", width)
    numbers = _wrapped(left, _terms_latex(expression, names, values, width=room),
                       f" = \\text{{{value}}}", width)
    return formula + numbers


# ---------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------


def result_to_dict(result) -> dict:
    scenario = result.scenario
    quantities = {}
    for name in result.graph.order:
        q = result.graph[name]
        quantities[name] = {
            "value": json_value(result.values[name]),
            "unit": q.unit,
            "description": q.description,
            "plugin": q.plugin,
            "changed_by": list(q.changed_by),
            "input": q.is_input,
            "formula": None if q.is_input else formula_text(q.expression),
            "reference": q.reference,
        }
        choice = result.graph.choice(name, result.values[name])
        if choice is not None:
            quantities[name]["choice"] = choice
    return {
        "scenario": {"name": scenario.name, "description": scenario.description,
                     "path": str(scenario.path) if scenario.path else None,
                     "presets": dict(scenario.presets), "levers": sorted(scenario.levers)},
        "quantities": quantities,
        "warnings": [warning.message for warning in result.warnings],
    }


def _rows(result, names: Iterable[str] | None):
    names = list(names) if names is not None else list(result.graph.order)
    for name in names:
        q = result.graph[name]
        yield name, show_quantity(result, name), q.description, q


def result_table(result, names=None) -> str:
    rows = list(_rows(result, names))
    width_name = max([len(r[0]) for r in rows] + [8])
    width_value = max([len(r[1]) for r in rows] + [5])
    lines = [_title(result), ""]
    lines.append(f"{'quantity'.ljust(width_name)}  {'value'.rjust(width_value)}  meaning")
    lines.append(f"{'-' * width_name}  {'-' * width_value}  {'-' * 7}")
    for name, value, description, q in rows:
        mark = " *" if q.changed_by else ""
        lines.append(f"{name.ljust(width_name)}  {value.rjust(width_value)}  {description}{mark}")
    if any(r[3].changed_by for r in rows):
        lines.append("")
        lines.append("* changed by a lever; `infermodel explain SCENARIO NAME` shows how")
    for warning in result.warnings:
        lines.append(f"warning: {warning}")
    return "\n".join(lines)


#: Summary groups shown first, in this order; any other group (a lever's) follows.
LEADING_GROUPS = ("memory", "latency", "throughput", "cost")
#: The groups printed as one line each under the summary instead of as rows.
LIMITS = "limits"
ASSUMPTIONS = "assumptions"


def summary_groups(result) -> list[tuple[str, list]]:
    """The summary's groups in order: ``[(group, [HeadlineInfo, ...]), ...]``."""
    groups: dict[str, list] = {}
    for headline in result.graph.headlines:
        groups.setdefault(headline.group, []).append(headline)
    lead = [g for g in LEADING_GROUPS if g in groups]
    rest = [g for g in groups if g not in LEADING_GROUPS and g not in (LIMITS, ASSUMPTIONS)]
    return [(g, groups[g]) for g in lead + rest]


def _line(result, group: str, title: str) -> str:
    parts = [f"{h.label} {show_quantity(result, h.name)}"
             for h in result.graph.headlines if h.group == group]
    return f"{title}: " + " · ".join(parts) if parts else ""


def limits_line(result) -> str:
    """``limits: prefill compute · decode memory bandwidth · ...`` (empty when none)."""
    return _line(result, LIMITS, "limits")


def assumptions_line(result) -> str:
    """``assumptions: prefill MFU 0.5 · decode MFU 1 · ...`` (empty when none registered)."""
    return _line(result, ASSUMPTIONS, "assumptions")


def result_summary(result) -> str:
    """The short summary ``infermodel run`` prints by default: headline rows by group,
    the assumptions on one line, the warnings, and how to see more.
    """
    groups = summary_groups(result)
    rows = [(h.label, show_quantity(result, h.name), h.name)
            for _, headlines in groups for h in headlines]
    width_label = max([len(r[0]) for r in rows] + [8])
    width_value = max([len(r[1]) for r in rows] + [5])
    lines = [_title(result), ""]
    for group, headlines in groups:
        lines.append(group)
        for h in headlines:
            value = show_quantity(result, h.name)
            band = interval_text(result, h)
            lines.append(f"  {h.label.ljust(width_label)}  {value.rjust(width_value)}  {h.name}"
                         + (f"  {band}" if band else ""))
    below = [line for line in (limits_line(result), assumptions_line(result)) if line]
    if below:
        lines += ["", *below]
    for warning in result.warnings:
        lines.append(f"warning: {warning}")
    lines += ["", "--all prints every quantity; `infermodel explain SCENARIO NAME` shows a "
                  "figure's derivation"]
    return "\n".join(lines)


def interval_text(result, headline) -> str:
    """``80 %: 26.1–41.3 ms`` for a headline whose interval quantities the result has."""
    if headline.interval is None or not all(n in result.values for n in headline.interval):
        return ""
    low, high = (show_quantity(result, n) for n in headline.interval)
    return f"(80 %: {low} … {high})"


def _title(result) -> str:
    scenario = result.scenario
    title = f"{scenario.name}"
    if scenario.description:
        title += f" — {scenario.description}"
    changed = overrides_text(scenario)
    return f"{title}\n{changed}" if changed else title


def overrides_text(scenario) -> str:
    """``with --set workload.batch=20, ...`` for what the command line changed (or "")."""
    parts = []
    for key, origin in scenario.origins.items():
        if origin.file != "--set":
            continue
        node: Any = scenario.raw
        for part in key.split("."):
            node = node.get(part) if isinstance(node, Mapping) else None
        parts.append(f"{key}={node}")
    return "with --set " + ", ".join(parts) if parts else ""


def result_markdown(result, names=None) -> str:
    lines = [f"**{result.scenario.name}**", "", "| quantity | value | meaning | plugin |",
             "|---|---:|---|---|"]
    for name, value, description, q in _rows(result, names):
        plugins = " → ".join([q.plugin, *q.changed_by])
        lines.append(f"| `{name}` | {value} | {description} | {plugins} |")
    notes = [w for w in result.warnings
             if names is None or w.quantity is None or w.quantity in names]
    if notes:
        lines.append("")
        lines.extend(f"> **warning:** {w}" for w in notes)
    return "\n".join(lines)


_LEFT = "style='text-align:left'"
_RIGHT = "style='text-align:right'"


def summary_html(result) -> str:
    """The headline figures as an HTML table grouped like the text summary."""
    import html  # a notebook's view, not the command line's

    out = [f"<table><thead><tr><th {_LEFT}>headline</th><th {_RIGHT}>value</th>"
           f"<th {_LEFT}>quantity</th></tr></thead><tbody>"]
    for group, headlines in summary_groups(result):
        out.append(f"<tr><th colspan='3' {_LEFT}>{html.escape(group)}</th></tr>")
        for h in headlines:
            value = show_quantity(result, h.name)
            out.append(f"<tr><td {_LEFT}>{html.escape(h.label)}</td>"
                       f"<td {_RIGHT}>{html.escape(value)}</td>"
                       f"<td {_LEFT}><code>{html.escape(h.name)}</code></td></tr>")
    out.append("</tbody></table>")
    for line in (limits_line(result), assumptions_line(result)):
        if line:
            out.append(f"<p>{html.escape(line)}</p>")
    for warning in result.warnings:
        out.append(f"<p><strong>warning:</strong> {html.escape(str(warning))}</p>")
    return "".join(out)


def result_html(result, names=None, *, headline: bool = False) -> str:
    """Every quantity (or those named) as HTML; with ``headline``, the summary first and
    the full table folded below it.
    """
    import html

    out = [f"<p><strong>{html.escape(result.scenario.name)}</strong></p>"]
    if headline and result.graph.headlines:
        out.append(summary_html(result))
        out.append("<details><summary>every quantity</summary>")
    out.append(f"<table><thead><tr><th {_LEFT}>quantity</th><th {_RIGHT}>value</th>"
               f"<th {_LEFT}>meaning</th><th {_LEFT}>plugin</th></tr></thead><tbody>")
    for name, value, description, q in _rows(result, names):
        plugins = " → ".join([q.plugin, *q.changed_by])
        out.append(f"<tr><td {_LEFT}><code>{html.escape(name)}</code></td>"
                   f"<td {_RIGHT}>{html.escape(value)}</td>"
                   f"<td {_LEFT}>{html.escape(description)}</td>"
                   f"<td {_LEFT}>{html.escape(plugins)}</td></tr>")
    out.append("</tbody></table>")
    if headline and result.graph.headlines:
        out.append("</details>")
    return "".join(out)


def result_latex(result, names=None) -> str:
    rows = []
    display = {n: q.latex for n, q in result.graph.quantities.items() if q.latex}
    for name, value, _description, _q in _rows(result, names):
        unit_value = value.replace("%", r"\%")
        rows.append(f"{latex_name(name, display.get(name))} &= \\text{{{unit_value}}}")
    return r"\begin{aligned}" + r" \\ ".join(rows) + r"\end{aligned}"


# ---------------------------------------------------------------------------------
# Derivations
# ---------------------------------------------------------------------------------


def _history_lines(step) -> list[str]:
    lines = []
    first = step.history[0]
    ref = f"  [{first.reference}]" if first.reference else ""
    if first.kind == "input":
        lines.append(f"  input from:  {step.source or 'plugin ' + repr(first.plugin)}{ref}")
    else:
        lines.append(f"  defined by:  {first.plugin}{ref}")
    last = len(step.history) - 1
    for index, change in enumerate(step.history[1:], start=1):
        ref = f"  [{change.reference}]" if change.reference else ""
        verb = {"replace": "replaced by:", "wrap": "wrapped by:"}.get(change.kind, change.kind + ":")
        lines.append(f"  {verb:<12} {change.plugin}: {change.reason}{ref}")
        if index < last and not isinstance(change.expression, float):
            lines.append(f"               → {step.name} = {formula_text(change.expression)}")
    return lines


def derivation_text(derivation) -> str:
    lines = []
    for step in derivation.steps:
        head = f"{step.name} = {show(step.value, step.unit)}"
        if step.choice is not None:
            head += f" ({step.choice})"
        lines.append(f"{head}    ({step.description})")
        if not step.is_input:
            base = step.history[0]
            if len(step.history) > 1 and base.kind == "define":
                lines.append(f"  base:        {step.name} = {formula_text(base.expression)}")
            lines.append(f"  formula:     {step.name} = {formula_text(written(step))}")
            lines.append(f"  with values: {step.name} = {substituted_text(written(step), derivation.values)}")
            lines.extend(f"  table:       {line}" for line in step.tables)
        lines.extend(_history_lines(step))
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def derivation_markdown(derivation) -> str:
    lines = [f"### Derivation of `{derivation.target}`", ""]
    for step in derivation.steps:
        choice = f" ({step.choice})" if step.choice is not None else ""
        lines.append(f"- **`{step.name}`** = {show(step.value, step.unit)}{choice} — "
                     f"{step.description}")
        if not step.is_input:
            lines.append(f"  - formula: `{step.name} = {formula_text(written(step))}`")
            lines.append(f"  - with values: `{step.name} = "
                         f"{substituted_text(written(step), derivation.values)}`")
            lines.extend(f"  - table: `{line.strip()}`" for line in step.tables)
        for text in _history_lines(step):
            lines.append(f"  - {text.strip()}")
    return "\n".join(lines) + "\n"


def step_latex(step, values, names) -> tuple[str, str | None]:
    """(formula line, substituted line) in LaTeX for one step, terms as written."""
    left = latex_name(step.name, names.get(step.name))
    if step.is_input:
        return f"{left} = {substituted_latex(_symbol(step.name), values, names)}", None
    expression = written(step)
    formula = f"{left} = {formula_latex(expression, names)}"
    value = show(step.value, step.unit).replace("%", r"\%")
    substituted = (f"{left} = {substituted_latex(expression, values, names)}"
                   f" = \\text{{{value}}}")
    return formula, substituted


def _symbol(name):
    from .quantity import symbol

    return symbol(name)


def symbol_legend(steps) -> list[tuple[str, str, str]]:
    r"""``(symbol, quantity name, meaning)`` for every step shown by a declared symbol
    (``L``, ``\mathrm{BW}``, ``N_{\mathrm{matmul}}``...), so a reader can decode them.
    Pass a derivation's ``steps`` and ``cut`` both (:func:`derivation_legend`) so that a
    symbol a shown formula names below a depth cut is decoded too.
    """
    return [(step.latex, step.name, step.description) for step in steps if step.latex]


def derivation_legend(derivation) -> list[tuple[str, str, str]]:
    """The legend of every symbol a derivation's printed formulas use, those of
    quantities below a depth cut included.
    """
    return symbol_legend([*derivation.steps, *derivation.cut])


def legend_latex(steps) -> str:
    r"""The legend as one LaTeX row: ``\text{where } L = \text{context} ...``."""
    items = [f"{symbol} = \\text{{{name.replace('_', chr(92) + '_')}}}"
             for symbol, name, _ in symbol_legend(steps)]
    return r"\text{where } " + r",\; ".join(items) if items else ""


def derivation_latex(derivation) -> str:
    everything = [*derivation.steps, *derivation.cut]
    names = {s.name: s.latex for s in everything if s.latex}
    rows = []
    for step in derivation.steps:
        rows.extend(step_rows(step, derivation.values, names))
    legend = legend_latex(everything)
    if legend:
        rows.append("&" + legend)
    return r"\begin{aligned}" + r" \\ ".join(rows) + r"\end{aligned}"


def derivation_to_dict(derivation) -> dict:
    steps = []
    for step in derivation.steps:
        steps.append({
            "name": step.name,
            "value": json_value(step.value),
            "unit": step.unit,
            "display": step.choice if step.choice is not None else show(step.value, step.unit),
            "description": step.description,
            "input": step.is_input,
            "formula": None if step.is_input else formula_text(written(step)),
            "substituted": None if step.is_input else substituted_text(written(step), derivation.values),
            "source": step.source,
            "reference": step.reference,
            "tables": list(step.tables),
            "history": [{"kind": c.kind, "plugin": c.plugin, "reason": c.reason,
                         "reference": c.reference,
                         "formula": formula_text(c.expression) if not isinstance(c.expression, float)
                         else plain_number(c.expression)} for c in step.history],
        })
    return {"quantity": derivation.target, "steps": steps}
