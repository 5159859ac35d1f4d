"""Formulas written by users (search constraints and objectives), parsed safely.

A formula is read with :func:`ast.parse` and the tree is walked against a
whitelist; nothing in the text is ever executed, and neither ``eval`` nor
``sympify``/``parse_expr`` sees it (both run the text as Python). Allowed:

* number constants (integers of at most 30 digits, finite floats);
* names of known quantities;
* ``+ - * / ** // %`` and unary ``+ -`` between numbers;
* calls of ``Max``, ``Min``, ``floor``, ``ceiling``, ``sqrt``, ``log``, ``exp`` and
  ``Abs`` by bare name, with positional arguments only;
* comparisons ``< <= > >= == !=``, chained (``1 <= batch <= 64``);
* ``and``, ``or``, ``not`` between conditions, and ``a if condition else b``.

Every node has a kind, number or condition, and mixing them is an error
(``fits + 1``, ``tpot and fits``). A constraint must be a condition, an objective a
number. The text is capped in length, node count, integer digits, exponent and the
size of any constant the parser folds, so no input can make the parser slow.

>>> f = parse_formula("tokens_per_s_per_user >= 25", {"tokens_per_s_per_user": "token/s"})
>>> f.kind, f.names
('condition', ('tokens_per_s_per_user',))
"""

from __future__ import annotations

import ast
import math
from collections.abc import Collection, Mapping
from typing import Any

import attrs

from ..errors import FormulaError, Problem, close_match, did_you_mean, suggest

MAX_LENGTH = 1000
MAX_NODES = 200
MAX_DIGITS = 30
MAX_EXPONENT = 64
MAX_MAGNITUDE = 1e300

NUMBER, CONDITION = "number", "condition"

#: Functions a formula may call: name -> (sympy attribute, least and most arguments).
FUNCTIONS = {
    "Max": ("Max", 1, 32),
    "Min": ("Min", 1, 32),
    "floor": ("floor", 1, 1),
    "ceiling": ("ceiling", 1, 1),
    "sqrt": ("sqrt", 1, 1),
    "log": ("log", 1, 2),
    "exp": ("exp", 1, 1),
    "Abs": ("Abs", 1, 1),
}

_OPERATORS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**",
              ast.FloorDiv: "//", ast.Mod: "%"}
_COMPARISONS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==",
                ast.NotEq: "!="}


@attrs.frozen
class Formula:
    """A parsed formula: its text, its sympy expression, its kind and the quantities it uses."""

    text: str
    expression: Any = attrs.field(repr=False)
    kind: str
    names: tuple[str, ...]
    #: The names that are condition quantities (evaluated as booleans).
    conditions: tuple[str, ...] = ()

    def evaluate(self, values: Mapping[str, Any], size: int | None = None):
        """Evaluate on numpy arrays (or scalars) of the quantities it names."""
        return evaluate_formula(self, values, size)

    def __str__(self) -> str:
        return self.text


def _error(message: str, text: str, *, expected: str | None = None,
           suggestion: str | None = None) -> FormulaError:
    shown = text if len(text) <= 80 else text[:77] + "..."
    return FormulaError(Problem(f"{message} in formula {shown!r}", expected=expected,
                                suggestion=suggestion))


def parse_formula(text: Any, names: Mapping[str, str] | Collection[str], *,
                  kind: str | None = None, what: str = "formula") -> Formula:
    """Parse ``text`` into a :class:`Formula` over the quantities in ``names``.

    ``names`` maps quantity names to units (a unit of ``"bool"`` makes the name a
    condition) or is a collection of numeric quantity names. ``kind`` demands a
    ``"condition"`` (a constraint) or a ``"number"`` (an objective); ``what`` names
    the formula in messages. Raises :class:`~infermodel.errors.FormulaError`.
    """
    import sympy

    if not isinstance(text, str):
        raise FormulaError(Problem(f"{what} must be a string, got {type(text).__name__} {text!r}",
                                   expected='a formula such as "tokens_per_s_per_user >= 25"'))
    if not text.strip():
        raise FormulaError(Problem(f"{what} is empty",
                                   expected='a formula such as "tokens_per_s_per_user >= 25"'))
    if len(text) > MAX_LENGTH:
        raise _error(f"{what} is {len(text)} characters long, more than {MAX_LENGTH}", text)
    units = dict(names) if isinstance(names, Mapping) else {n: "1" for n in names}
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        detail = f" ({exc.msg})" if getattr(exc, "msg", None) else ""
        raise _error(f"{what} is not valid syntax{detail}", text,
                     expected="quantities, numbers, arithmetic and comparisons") from None
    except (ValueError, RecursionError, MemoryError, OverflowError):
        raise _error(f"{what} cannot be read", text) from None
    count = sum(1 for _ in ast.walk(tree))
    if count > MAX_NODES:
        raise _error(f"{what} has {count} syntax nodes, more than {MAX_NODES}", text)
    builder = _Builder(text, units, what)
    try:
        expression, found = builder.build(tree.body)
    except FormulaError:
        raise
    except (TypeError, ValueError, ArithmeticError, AttributeError, RecursionError) as exc:
        raise _error(f"{what} cannot be built ({type(exc).__name__}: {exc})", text) from None
    if kind is not None and found != kind:
        if kind == CONDITION:
            raise _error(f"{what} is a number, not a condition", text,
                         expected="a comparison such as 'tokens_per_s_per_user >= 25', or a "
                                  "condition quantity such as 'fits'")
        raise _error(f"{what} is a condition, not a number", text,
                     expected="a quantity or an arithmetic expression to minimise or maximise")
    if found == CONDITION and isinstance(expression, bool):
        expression = sympy.true if expression else sympy.false
    return Formula(text=text.strip(), expression=expression, kind=found, names=tuple(builder.used),
                   conditions=tuple(n for n in builder.used if units[n] == "bool"))


class _Builder(ast.NodeVisitor):
    """Turns a formula's syntax tree into a sympy expression, refusing what is not allowed."""

    def __init__(self, text: str, units: Mapping[str, str], what: str):
        self.text = text
        self.units = units
        self.what = what
        self.used: list[str] = []

    def fail(self, message, **kw):
        return _error(message, self.text, **kw)

    def number(self, node, operation: str):
        expression, kind = self.build(node)
        if kind != NUMBER:
            raise self.fail(f"{operation} needs numbers, but {ast.unparse(node)!r} is a condition",
                            suggestion="compare it, e.g. 'x >= 1', or combine conditions with "
                                       "'and', 'or', 'not'")
        return expression

    def condition(self, node, operation: str):
        expression, kind = self.build(node)
        if kind != CONDITION:
            raise self.fail(f"{operation} needs conditions, but {ast.unparse(node)!r} is a number",
                            suggestion="write a comparison such as "
                                       f"'{ast.unparse(node)} > 0'")
        return expression

    def checked(self, value):
        """Refuse folded constants that are undefined or too large."""
        import sympy

        if not isinstance(value, sympy.Basic):
            return value
        if value.has(sympy.zoo, sympy.oo, -sympy.oo, sympy.nan):
            raise self.fail("a constant part is undefined or infinite (division by zero?)")
        if value.has(sympy.I):
            raise self.fail("a constant part is not a real number")
        # Every number sympy folded into the expression stays small, so that no
        # nesting of powers can make the next operation slow.
        for atom in value.atoms(sympy.Number):
            if isinstance(atom, sympy.Rational):
                big = max(abs(int(atom.p)), abs(int(atom.q)))
                if big.bit_length() > 1000:
                    raise self.fail(f"a constant part exceeds {MAX_MAGNITUDE:g}")
            else:
                try:
                    magnitude = abs(float(atom))
                except (TypeError, ValueError, OverflowError):
                    raise self.fail("a constant part is too large") from None
                if not math.isfinite(magnitude) or magnitude > MAX_MAGNITUDE:
                    raise self.fail(f"a constant part exceeds {MAX_MAGNITUDE:g}")
        return value

    def build(self, node) -> tuple[Any, str]:
        """The sympy expression of ``node`` and its kind (number or condition)."""
        return self.visit(node)

    def visit_Constant(self, node) -> tuple[Any, str]:
        import sympy

        value = node.value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(f"{value!r} is not a number",
                            expected="numbers, quantity names and operators")
        if isinstance(value, int):
            if len(str(abs(value))) > MAX_DIGITS:
                raise self.fail(f"an integer has more than {MAX_DIGITS} digits")
            return self.checked(sympy.Integer(value)), NUMBER
        if not math.isfinite(value) or abs(value) > MAX_MAGNITUDE:
            raise self.fail(f"the number {value!r} is not finite or too large")
        return sympy.Float(value), NUMBER

    def visit_Name(self, node) -> tuple[Any, str]:
        from ..quantity import check_name, symbol

        name = node.id
        if not isinstance(node.ctx, ast.Load):
            raise self.fail(f"{name!r} cannot be assigned")
        if name in FUNCTIONS:
            raise self.fail(f"{name!r} is a function; call it, e.g. {name}(x)")
        if name not in self.units:
            near = close_match(name, self.units)
            if near is None and name in ("true", "false", "True", "False", "fits_memory"):
                near = "fits" if "fits" in self.units else None
            raise self.fail(f"no quantity named {name!r}",
                            expected="a quantity of the scenario",
                            suggestion=(did_you_mean(near) or "check for typos?")
                            + " (`infermodel run SCENARIO --format json` lists every quantity)")
        problem = check_name(name)
        if problem:
            raise self.fail(problem)
        if name not in self.used:
            self.used.append(name)
        return symbol(name), (CONDITION if self.units[name] == "bool" else NUMBER)

    def visit_BinOp(self, node) -> tuple[Any, str]:
        import sympy

        op = _OPERATORS.get(type(node.op))
        if op is None:
            raise self.fail(f"the operator {type(node.op).__name__} is not allowed",
                            expected="+ - * / ** // %")
        left = self.number(node.left, f"'{op}'")
        right = self.number(node.right, f"'{op}'")
        if op == "**" and right.is_number:
            if abs(float(right)) > MAX_EXPONENT:
                raise self.fail(f"the exponent {right} is larger than {MAX_EXPONENT}")
            if left.is_number and left == 0 and float(right) < 0:
                raise self.fail("zero to a negative power is undefined")
        if op in ("/", "//", "%") and right.is_number and right == 0:
            raise self.fail("division by zero")
        if op == "+":
            value = left + right
        elif op == "-":
            value = left - right
        elif op == "*":
            value = left * right
        elif op == "/":
            value = left / right
        elif op == "**":
            value = left ** right
        elif op == "//":
            value = sympy.floor(left / right)
        else:
            value = sympy.Mod(left, right)
        return self.checked(value), NUMBER

    def visit_UnaryOp(self, node) -> tuple[Any, str]:
        import sympy

        if isinstance(node.op, ast.Not):
            return sympy.Not(self.condition(node.operand, "'not'")), CONDITION
        if isinstance(node.op, (ast.UAdd, ast.USub)):
            value = self.number(node.operand, "a sign")
            return (value if isinstance(node.op, ast.UAdd) else -value), NUMBER
        raise self.fail(f"the operator {type(node.op).__name__} is not allowed")

    def visit_BoolOp(self, node) -> tuple[Any, str]:
        import sympy

        word = "'and'" if isinstance(node.op, ast.And) else "'or'"
        parts = [self.condition(v, word) for v in node.values]
        return (sympy.And(*parts) if isinstance(node.op, ast.And) else sympy.Or(*parts)), CONDITION

    def visit_Compare(self, node) -> tuple[Any, str]:
        import sympy

        operands = [node.left, *node.comparators]
        values = [self.number(o, "a comparison") for o in operands]
        parts = []
        for op, left, right in zip(node.ops, values, values[1:]):
            symbol_text = _COMPARISONS.get(type(op))
            if symbol_text is None:
                raise self.fail(f"the comparison {type(op).__name__} is not allowed",
                                expected="< <= > >= == !=")
            relation = {"<": sympy.Lt, "<=": sympy.Le, ">": sympy.Gt, ">=": sympy.Ge,
                        "==": sympy.Eq, "!=": sympy.Ne}[symbol_text]
            parts.append(relation(left, right))
        return (parts[0] if len(parts) == 1 else sympy.And(*parts)), CONDITION

    def visit_Call(self, node) -> tuple[Any, str]:
        import sympy

        if not isinstance(node.func, ast.Name):
            raise self.fail("only the functions " + ", ".join(FUNCTIONS) +
                            " may be called, by their bare names")
        name = node.func.id
        if name not in FUNCTIONS:
            raise self.fail(f"{name!r} is not an allowed function",
                            expected="one of " + ", ".join(FUNCTIONS),
                            suggestion=suggest(name, FUNCTIONS))
        if node.keywords:
            raise self.fail(f"{name}() takes no keyword arguments")
        if any(isinstance(a, ast.Starred) for a in node.args):
            raise self.fail(f"{name}() takes no * arguments")
        attribute, least, most = FUNCTIONS[name]
        if not least <= len(node.args) <= most:
            wanted = str(least) if least == most else f"{least} to {most}"
            raise self.fail(f"{name}() takes {wanted} argument(s), got {len(node.args)}")
        arguments = [self.number(a, f"{name}()") for a in node.args]
        return self.checked(getattr(sympy, attribute)(*arguments)), NUMBER

    def visit_IfExp(self, node) -> tuple[Any, str]:
        import sympy

        test = self.condition(node.test, "the condition of 'if ... else'")
        body, body_kind = self.build(node.body)
        other, other_kind = self.build(node.orelse)
        if body_kind != other_kind:
            raise self.fail("both branches of 'a if condition else b' must be numbers, "
                            "or both conditions")
        if body_kind == CONDITION:
            return sympy.Or(sympy.And(test, body), sympy.And(sympy.Not(test), other)), CONDITION
        return sympy.Piecewise((body, test), (other, True)), NUMBER

    def generic_visit(self, node) -> tuple[Any, str]:
        what = type(node).__name__
        hint = {"Attribute": "attributes (a.b) are not allowed", "Subscript": "indexing is not allowed",
                "Lambda": "lambda is not allowed", "List": "lists are not allowed",
                "Tuple": "tuples are not allowed (one formula per constraint)",
                "JoinedStr": "strings are not allowed", "NamedExpr": "assignment is not allowed"}
        raise self.fail(hint.get(what, f"{what} is not allowed"),
                        expected="numbers, quantity names, arithmetic, comparisons, and/or/not, "
                                 "'a if c else b' and " + ", ".join(FUNCTIONS))

_COMPILED: dict[tuple, Any] = {}


def evaluate_formula(formula: Formula, values: Mapping[str, Any], size: int | None = None):
    """Evaluate ``formula`` on arrays: numbers as float64, conditions as bool arrays.

    ``values`` maps each name the formula uses to an array (or scalar); condition
    quantities may be given as 0/1 floats. With ``size`` the result is broadcast to
    that length.
    """
    import numpy as np
    import sympy

    from ..quantity import symbol

    key = (sympy.srepr(formula.expression), formula.names)
    function = _COMPILED.get(key)
    if function is None:
        # Every name was validated by parse_formula, so the generated code is safe.
        function = sympy.lambdify([symbol(n) for n in formula.names], formula.expression,
                                  modules="numpy", docstring_limit=0)
        if len(_COMPILED) > 256:
            _COMPILED.clear()
        _COMPILED[key] = function
    arguments = []
    for name in formula.names:
        array = np.asarray(values[name])
        arguments.append(array.astype(bool) if name in formula.conditions else array)
    with np.errstate(all="ignore"):
        result = np.asarray(function(*arguments))
    result = result.astype(bool) if formula.kind == CONDITION else result.astype(float)
    if size is not None and result.shape != (size,):
        result = np.broadcast_to(result, (size,)).copy()
    return result


__all__ = ["CONDITION", "FUNCTIONS", "NUMBER", "Formula", "evaluate_formula", "parse_formula"]
