#!/usr/bin/env python3
"""Ground truth for how the engines' chat-template environment prints values: floats Python
spells in exponent form, strings inside containers (repr escapes every non-printable
character), containers, tuples, undefined values, and the filters and operators that turn
values into text.

Then every test, filter and operator of a list over every kind of JSON value (and an
undefined one), and Python's string methods and Jinja's string filters over tricky text.

Engines render chat templates with transformers' `_compile_jinja_template` (Jinja's
ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, its own `tojson`,
`raise_exception`, `strftime_now`); request JSON reaches the template through `json.loads`
(vLLM, SGLang and TensorRT-LLM parse the body, and tool-call arguments, that way). Each case
renders one template over one context (the JSON text is in the file; parse it with Python's
rules) and records `rendered` or the error.

Reproduce (no torch needed):

    python3 -m venv /tmp/tfj && /tmp/tfj/bin/pip install transformers==4.57.6 jinja2==3.1.6
    /tmp/tfj/bin/python scripts/gen_jinja_value_vectors.py \
        > testdata/vectors/jinja-values/python-values-v1.json
"""
import json
import sys

import jinja2
import transformers
from transformers.utils.chat_template_utils import _compile_jinja_template

CONTEXTS = {
    # Floats on both sides of Python's exponent thresholds (1e-4, 1e16), integers past 2**53
    # and 2**64, tool-call arguments as engines parse them.
    "numbers": r'''{
 "fs": [1e20, 1e-5, 1e16, 1e15, 0.0001, 0.00012, 9.999999999999999e-05, 1.5e300, -0.0,
        123456789012345678.0, 2.5, 1e-7, 3.0, 0.1, -1e-5, 5e-324, 1.7976931348623157e308,
        100.0, 1234567.125, 1e-10, 1e100, 9999999999999998.0],
 "is": [0, -1, 9007199254740993, 9223372036854775807, -9223372036854775808, 18446744073709551615],
 "args": {"lat": 1e-05, "lon": 0.0001, "scale": 1e+16, "ratio": 0.5, "name": "x", "tags": [1e-06, "a"], "opts": {"eps": 1e-08}},
 "nested": [[1e-5, {"a": 1e20}], ["q"], []]
}''',
    # Strings Python's repr escapes where minijinja did not (no-break space, zero-width
    # joiner in an emoji, ideographic space, line separator, soft hyphen, BOM, private use,
    # an unassigned code point), quotes, controls; tool definitions holding them; no float
    # Python spells in exponent form.
    "text": r'''{
 "ss": ["a'b", "a\"b", "a'b\"c", "new\nline\ttab\r", "\u0001\u001f\u007f\u0085", "\u00a0nbsp",
        "\ud83d\udc68\u200d\ud83d\udc69\u200d\ud83d\udc67", "\u3000ideographic", "\u2028\u2029",
        "\u00adsoft", "\ufeffbom", "\ue000", "\u0378", "\u00e9\u6771\ud83d\ude00", "\\", ""],
 "d": {"s": "x'y\u00a0", "n": 3, "f": 1.5, "l": [null, true, false], "e": {}},
 "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather\u00a0now \u2014 \u201cquoted\u201d",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 14}, "p": {"type": "number", "minimum": 0.5}}, "required": ["city"]}}}]
}''',
    # Integer literals beyond 64 bits (Python's json.loads keeps them exact ints), `-0` (the
    # int 0), float literals of the same magnitudes, and tool-call arguments holding them.
    "bigints": r'''{
 "bs": [123456789012345678901234, -9223372036854775809, 18446744073709551616, -0,
        170141183460469231731687303715884105727, -170141183460469231731687303715884105728,
        1e19, 12345678901234567890123.0, -0.0, 18446744073709551615],
 "args": {"id": 123456789012345678901234, "zero": -0, "f": 1e19, "l": [99999999999999999999, 1]},
 "messages": [{"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"n": 98765432109876543210987, "m": -0}}}]}]
}''',
}

PER_ITEM = [
    "{{ x }}",
    "{{ x|string }}",
    "{{ [x] }}",
    "{{ {'k': x} }}",
    "{{ (x,) }}",
    "{{ x|tojson }}",
    "{{ x ~ '' }}",
    "{{ x|trim }}",
    "{{ x|upper }}",
    "{{ x|lower }}",
    "{{ x|title }}",
    "{{ x|capitalize }}",
    "{{ x|e }}",
    "{{ x|safe }}",
    "{{ x|replace('e', 'E') }}",
    "{{ [x]|join }}",
    "{{ x|format }}",
    # `~` over containers the template builds, and over arithmetic.
    "{{ '' ~ [x] ~ '' }}",
    "{{ 'k=' ~ {'k': x} }}",
    "{{ (x,) ~ '|' ~ [x, [x]] }}",
    "{% set y = '<' ~ x ~ '>' %}{{ y }}",
    "{{ 'n' ~ (x if x is number else 0) * 2 }}",
]

WHOLE = {
    "numbers": [
        "{{ fs }}", "{{ is }}", "{{ fs|join(', ') }}", "{{ is|join(', ') }}", "{{ fs|tojson }}",
        "{{ args }}", "{{ args|tojson }}", "{{ args|string }}", "{{ args.items()|list }}",
        "{{ nested }}", "{{ nested|string }}", "{{ fs|map('string')|join('|') }}",
        "{% for k, v in args.items() %}{{ k }}={{ v }};{% endfor %}",
        "{% for k, v in args|items %}{{ k }}={{ v }};{% endfor %}",
        "{%- for k, v in args|items %}<parameter={{ k }}>{% set v = v|tojson|safe if v is mapping or (v is sequence and v is not string) else v|string %}{{ v }}</parameter>{% endfor %}",
        "{{ fs[1]|round(7) }}|{{ fs[0]|int }}|{{ fs[1] * 3 }}|{{ fs[1] > 0 }}|{{ fs[1] is number }}",
        "{{ 1e16 }}|{{ 1/3 }}|{{ 10/4 }}|{{ 0.1 * 3 }}|{{ 2 ** 0.5 }}|{{ 1e-5 }}",
        "{{ [undefined_name] }}",
        "{{ '%s'|format(fs[1]) }}",
        "{{ '%s|%r|%d|%5s|%-6s|%.3s|%05d|%+d|% d|%%'|format(fs[1], fs[1], fs[4], fs[2], fs[0], fs[5], is[1], is[0], is[0]) }}",
        "{{ '%(a)s=%(b)r'|format(a=fs[1], b=args) }}", "{{ '%s'|format(args) }}", "{{ '%s %s'|format(nested, none) }}",
        "{{ '%d'|format(fs[4]) }}|{{ '%i'|format(-2.7) }}|{{ '%d'|format(true) }}", "{{ '%f'|format(fs[1]) }}",
        "{{ '[%-5d|%+05d|% 3d|%3.1s|%ld|%u|%-+4d|%0-4d]'|format(-7, 42, 5, 'abc', 9, 3.9, 1, 2) }}",
        "{{ '%(k)s'|format(k=1) }}|{{ '%s'|format(k=1) }}|{{ '%(k)5s|%(k)-3d|'|format(k=7) }}",
        "{{ '%(k)s %s'|format(1) }}",
        "{{ '%s'|format() }}", "{{ '%s'|format(1, 2) }}", "{{ '%d'|format('x') }}", "{{ 'a%'|format }}",
        "{% if false %}{{ fs|from_json }}{{ fs|map('from_json') }}{% endif %}{{ fs[1] }}|{{ fs[1]|pprint }}|{{ fs|first|pprint }}",
        "{{ 1e100|int if false else 1 }}|{{ fs[9]|int }}|{{ -2.5e20|int }}|{{ 1.7e38|int }}",
        "{{ fs[1]|replace('e', 'E') }}|{{ fs|replace(',', ';') }}|{{ 'a1b'|replace(1, fs[1]) }}",
    ],
    "text": [
        "{{ d|pprint }}", "{% for s in ss %}{{ s|pprint }};{% endfor %}", "{{ d.n|pprint }}|{{ d.f|pprint }}|{{ none|pprint }}|{{ true|pprint }}",
        "{{ ss }}", "{{ ss|join('|') }}", "{{ ss|tojson }}", "{{ d }}", "{{ d|string }}",
        "{{ d.items()|list }}", "{{ tools }}", "{{ tools|tojson }}", "{{ tools|string }}",
        "{% for t in tools %}{{ t.function }}{% endfor %}",
        "{{ 'Tools: ' ~ tools }}", "{{ 'S' ~ ss }}", "{{ 'D' ~ d ~ '|' ~ d.l }}",
        "{% for s in ss %}{{ '%s|%r|%8s|%-3.2s'|format(s, s, s, s) }};{% endfor %}",
        "{{ '%s'|format(d) }}|{{ '%r'|format(tools[0].function.name) }}|{{ '%(n)s'|format(n=ss[5]) }}",
        "{{ ss[0]|safe|format(ss[1]) }}",
        "{% for k, v in d|items %}{{ k }}={{ v }};{% endfor %}",
    ],
    "bigints": [
        "{{ bs }}", "{{ bs|join(', ') }}", "{{ bs|tojson }}", "{{ bs|string }}", "{{ args }}",
        "{{ args|tojson }}", "{{ args|string }}", "{{ args.items()|list }}",
        "{% for k, v in args|items %}{{ k }}={{ v }};{% endfor %}",
        "{%- for k, v in args|items %}<parameter={{ k }}>{% set v = v|tojson|safe if v is mapping or (v is sequence and v is not string) else v|string %}{{ v }}</parameter>{% endfor %}",
        "{{ bs[0] + 1 }}|{{ bs[0] * 2 }}|{{ bs[0] // 7 }}|{{ bs[0] % 7 }}|{{ bs[0] > bs[2] }}|{{ bs[0] == 123456789012345678901234 }}",
        "{{ bs[0] is number }}|{{ bs[0] is integer }}|{{ bs[0] is float }}|{{ bs[3] is integer }}|{{ bs[0]|int }}|{{ bs[0]|float }}|{{ bs[0]|abs }}|{{ bs[1]|abs }}",
        "{{ bs|max }}|{{ bs|min }}|{{ bs|sum }}|{{ bs|sort|list }}|{{ bs|unique|list }}",
        "{{ bs[0] - bs[0] }}|{{ bs[4] + 1 }}|{{ bs[5] - 1 }}|{{ bs[0] / 2 }}|{{ -bs[0] }}|{{ bs[0] ** 2 }}",
        "{% for m in messages %}{% for t in m.tool_calls %}{{ t.function.arguments|tojson }}|{{ t.function.arguments }}|{{ t.function.arguments.n }}{% endfor %}{% endfor %}",
        "{{ '%d'|format(bs[0]) }}|{{ '%s'|format(bs[0]) }}|{{ bs[0]|string|length }}",
    ],
}


# Tests, filters and operators over every kind of JSON value (and an undefined one): what
# Jinja answers, or that it raises.
VALUES = {
    "none": None, "true": True, "false": False, "zero": 0, "one": 1, "float": 1.5,
    "empty_str": "", "str": "ab c", "empty_list": [], "list": [1, "x"], "empty_dict": {},
    "dict": {"a": 1, "b": None}, "bigint": 123456789012345678901234,
}
# Values whose JSON text matters: `-0` is the int 0 to json.loads.
RAW_VALUES = {"negzero": "-0"}
TESTS = ["iterable", "sequence", "mapping", "string", "number", "integer", "float", "boolean",
         "defined", "undefined", "none", "true", "false", "callable", "sameas none", "eq 1",
         "lower", "upper", "odd", "even", "divisibleby 2", "in [1, 'x']", "escaped"]
FILTERS = ["default('Z')", "default('Z', true)", "length", "list", "first", "last", "string",
           "int", "float", "trim", "upper", "tojson", "join(',')", "items|list", "dictsort",
           "reverse|list", "sort", "unique|list", "sum", "min", "max", "abs", "round", "bool",
           "capitalize", "title", "wordcount", "center(8)", "indent(2)", "batch(1)|list",
           "select|list", "reject|list", "map('string')|list", "selectattr('a')|list",
           "attr('a')", "attr('items')", "safe", "e", "replace('a','Z')", "truncate(3)"]
OPERATORS = ["not x", "x == none", "x != none", "x and 'T' or 'F'", "'T' if x else 'F'",
             "x ~ '|'", "x + x", "x * 2", "x in x", "[x]", "{'k': x}", "(x, x)", "x[0]",
             "x['a']", "x.a", "x[1:]", "x|length > 0 if x is iterable else 'n'",
             "x.get('a') if x is mapping else 'n'", "x.items()|list if x is mapping else 'n'",
             "x.keys()|list if x is mapping else 'n'", "x.values()|list if x is mapping else 'n'",
             "x.split() if x is string else 'n'", "x.startswith('a') if x is string else 'n'",
             "x.strip() if x is string else 'n'", "x.upper() if x is string else 'n'",
             "x.count('a') if x is string else 'n'", "x.find('b') if x is string else 'n'",
             "x.replace('a', 'b') if x is string else 'n'", "x.title() if x is string else 'n'",
             "x.lstrip('a') if x is string else 'n'", "x.endswith('c') if x is string else 'n'"]
STATEMENTS = ["{% for i in x %}[{{ i }}]{% endfor %}",
              "{% for k, v in x.items() %}[{{ k }}={{ v }}]{% endfor %}",
              "{% if x %}T{% else %}F{% endif %}",
              "{{ x|length if x is not none else 'N' }}",
              "{% for i in x %}{{ loop.index }}/{{ loop.length }}/{{ loop.last }}/{{ loop.revindex }}/{{ loop.first }};{% else %}E{% endfor %}",
              "{% for i in x if i %}{{ i }}{% if not loop.last %},{% endif %}{% endfor %}"]


# Python's string methods and Jinja's string filters over text where they are easy to get
# wrong: apostrophes and digits before letters (`title`), ß and digraphs and ligatures
# (titlecase mappings), titlecase letters, final sigma, Python's line and space characters.
STRINGS = ["they're bill's friends", "hello world", "ÉCOLE école", "ß straße", "ǆemal",
           "İstanbul", "  a  b  ", "a,b,,c", "x\ny\r\nz\r", "\tTab\x0bVT\x0cFF\x1cFS",
           "123abc", "ABC", "a_b-c.d", "ﬁne ﬂow", "Σίσυφος", "ΣΑΣ", "σς", "Ⅻ roman", "𝐀𝐁",
           "k\u0307", "ǈ titlecase", "", " ", "<think>x</think>y", "a\u00a0b\u3000c", "1.5e-5"]
STRING_METHODS = ["title()", "capitalize()", "upper()", "lower()", "split()", "split(',')",
                  "split(',', 1)", "splitlines()", "strip()", "lstrip()", "rstrip()",
                  "strip('a ')", "startswith('a')", "endswith('c')", "replace('a', 'X')",
                  "replace('a', 'X', 1)", "count('a')", "find('b')", "rfind('b')", "isalpha()",
                  "isdigit()", "isnumeric()", "isalnum()", "isspace()", "islower()",
                  "isupper()", "join(['1','2'])", "lower().split()", "split('</think>')[-1]",
                  "split('</think>')[0].strip()", "strip('\\n')"]
STRING_FILTERS = ["title", "capitalize", "upper", "lower", "trim", "length", "list|length",
                  "first", "last", "reverse", "replace('a','Z')", "string", "tojson", "e"]


# Template sources whose line breaks and whitespace control Jinja's lexer reads its own way:
# Windows and old-Mac line breaks (the lexer joins the lines with "\n", also inside string
# literals), trim_blocks after `{% raw %}` (not applied), markers on raw tags. Rendered over
# the context x_one.
SOURCES = ["a\r\nb{{ x }}\r\nc\r\n", "a\rb{{ x }}\rc", "{% if x %}\r\n  yes\r\n{% endif %}\r\nend",
           "{{ 'p\r\nq' }}|{{ \"r\\r\\ns\" }}", "{% set s %}\r\n  v{{ x }}\r\n{% endset %}[{{ s }}]",
           "{% for i in [1,2] %}\r\n{{ i }}\r{% endfor %}\n", "{% raw %}\n  {{ x }}\n{% endraw %}\nw",
           "{% raw -%}\n  {{ x }}\n{%- endraw %}\nw", "a\n  {%- raw %}\nb{% endraw %}c",
           "{% raw %}r{% endraw %}\n\nq", "{% raw %}\n1{% endraw %}{% raw %}\n\n2{% endraw %}",
           "  {% raw %}\n  x\n  {% endraw %}\ny", "{% raw %}\r\nz\r\n{% endraw %}\r\n.",
           "\t{% if x %}A{% endif %}\n  \t{%- if x %}B{% endif %}\n", "  {%+ if x %}C{% endif %}\n{% if x +%}\nD{% endif %}",
           "x {#- c -#} y\n  {# c #}\nz", "{% macro m(a) %}\n<{{ a }}>\n{% endmacro %}{{ m(x) }}|{{ m(x)|trim }}",
           # String literals decoded with Python's unicode_escape (Jinja's lexer).
           r"{{ '\a|\b|\f|\v|\0|\101|\x41|\u00e9|\U0001F600|\q|\'|\"|\\' }}", r'{{ "\a\b" ~ x }}',
           r"{{ '\N{BULLET}' }}", "{{ 'a\\\nb' }}", r"{{ '\8' }}", r"{{ '\777' }}", r"{{ '\x4' if false else 1 }}",
           r"{{ '\/' }}|{{ '\{' }}|{{ '\%' }}", "{{ '\\é' }}", r"{% set s = 'a\tb\vc' %}{{ s|length }}{{ s.split() }}"]


def render(template, ctx):
    try:
        return {"rendered": _compile_jinja_template(template).render(**ctx)}
    except Exception as e:  # noqa: BLE001 - any engine error is the truth recorded
        return {"error": f"{type(e).__name__}: {e}"}


def main():
    cases = []
    for name, text in CONTEXTS.items():
        ctx = json.loads(text)
        items = {"numbers": "fs", "text": "ss", "bigints": "bs"}[name]
        for t in PER_ITEM:
            tmpl = "{% for x in " + items + " %}" + t + "|{% endfor %}"
            cases.append({"context": name, "template": tmpl, **render(tmpl, ctx)})
        if name == "numbers":
            for t in PER_ITEM[:8]:
                tmpl = "{% for x in is %}" + t + "|{% endfor %}"
                cases.append({"context": name, "template": tmpl, **render(tmpl, ctx)})
        for tmpl in WHOLE[name]:
            cases.append({"context": name, "template": tmpl, **render(tmpl, ctx)})
    exprs = (["{{ x is " + t + " }}" for t in TESTS] + ["{{ x|" + f + " }}" for f in FILTERS]
             + ["{{ " + o + " }}" for o in OPERATORS] + STATEMENTS)
    contexts = dict(CONTEXTS)
    for name, value in VALUES.items():
        contexts["x_" + name] = json.dumps({"x": value})
    for name, raw in RAW_VALUES.items():
        contexts["x_" + name] = '{"x": ' + raw + '}'
    contexts["x_undefined"] = "{}"
    for e in exprs:
        for name in list(VALUES) + list(RAW_VALUES) + ["undefined"]:
            ctx = json.loads(contexts["x_" + name])
            cases.append({"context": "x_" + name, "template": e, **render(e, ctx)})
    for t in SOURCES:
        cases.append({"context": "x_one", "template": t, **render(t, {"x": 1})})
    for i, text in enumerate(STRINGS):
        name = f"s_{i}"
        contexts[name] = json.dumps({"x": text}, ensure_ascii=False)
        templates = (["{{ x." + m + " }}" for m in STRING_METHODS]
                     + ["{{ x|" + f + " }}" for f in STRING_FILTERS]
                     + ["{{ x is lower }}", "{{ x is upper }}"])
        for t in templates:
            cases.append({"context": name, "template": t, **render(t, {"x": text})})
    out = {
        "generator": "scripts/gen_jinja_value_vectors.py",
        "versions": {
            "python": sys.version.split()[0],
            "transformers": transformers.__version__,
            "jinja2": jinja2.__version__,
        },
        "contexts": contexts,
        "cases": cases,
    }
    json.dump(out, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
