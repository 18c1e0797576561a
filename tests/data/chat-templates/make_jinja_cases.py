#!/usr/bin/env python3
"""Generates jinja_cases.json: small templates exercising Jinja semantics, rendered by real Jinja2 in the
environment Hugging Face uses for chat templates (same as /work/shared/tools/make_chat_goldens.py:
ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, HF tojson/raise_exception/
strftime_now fixed at FIXED_NOW, {% generation %}). Usage: make_jinja_cases.py OUT.json"""
import datetime, json, sys
import jinja2, jinja2.ext, jinja2.nodes
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

FIXED_NOW = datetime.datetime(2026, 1, 15, 9, 30, 0)

class GenerationTag(jinja2.ext.Extension):
    tags = {"generation"}
    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.Scope(body, lineno=lineno)

def make_env():
    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)
    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
    def strftime_now(fmt):
        return FIXED_NOW.strftime(fmt)
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols, GenerationTag])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env

MSGS = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Bye"}]
CTX = {"messages": MSGS, "n": 7, "f": 2.5, "s": "Hello World", "u": "héllo wörld 你好", "none_v": None,
       "t": True, "lst": [3, 1, 2], "d": {"b": 1, "a": 2, "items": "x"}, "empty": [], "nested": {"x": {"y": [10, 20]}},
       "words": ["banana", "Apple", "cherry", "apple"], "people": [{"name": "Ann", "age": 30, "tags": ["a"]},
       {"name": "bob", "age": 25}, {"name": "Cid", "age": 30}]}

# (name, template[, context]). The context defaults to CTX.
CASES = [
    # --- whitespace control, trim_blocks / lstrip_blocks ---
    ("ws_lstrip_trim", "a\n  {% if true %}\n  x\n  {% endif %}\nb"),
    ("ws_plus_disables_lstrip", "a\n  {%+ if true %}\n  x\n  {%+ endif +%}\nb"),
    ("ws_inline_block_no_lstrip", "a  {% if true %}x{% endif %}  \nb"),
    ("ws_comments", "a\n  {# c #}\n  {{ 1 }}\n  {#- c -#}  z"),
    ("ws_minus_everywhere", "a {{- 1 -}} b {%- if 1 -%} c {%- endif -%} \n\n d"),
    ("ws_raw", "{% raw %}{{ x }}{% endraw %}\n|{%- raw -%} {{ y }} {%- endraw -%} |"),
    ("ws_raw_newline", "{% raw %}\n  {% if %}\n{% endraw %}\nx"),
    ("ws_trailing_newline_dropped", "x\n"),
    ("ws_only_one_trailing_newline_dropped", "x\n\n"),
    ("ws_crlf", "{% if true %}\r\nx\r\n{% endif %}\r\n"),
    ("ws_var_no_trim", "{{ 1 }}\n{{ 2 }}\n"),
    ("ws_tabs_lstrip", "a\n\t {% if true %}x{% endif %}"),
    ("ws_lstrip_at_start", "   {% if true %}x{% endif %}"),
    ("ws_lstrip_after_var", "{{ 1 }}  {% if true %}x{% endif %}"),
    ("ws_for_lines", "{% for x in [1,2] %}\n{{ x }}\n{% endfor %}\n"),
    ("ws_set_lines", "  {%- set a = 1 %}\n{{ a }}"),
    ("ws_nested_indent", "<ul>\n    {% for i in [1, 2] %}\n        <li>{{ i }}</li>\n    {% endfor %}\n</ul>"),
    ("ws_minus_var_newlines", "a\n\n{{- 'b' -}}\n\nc"),
    ("ws_comment_trim_block", "{# only #}\nnext"),
    ("ws_minus_comment_multiline", "x  {#- multi\nline -#}\n  y"),
    ("ws_block_end_plus", "{% if true +%}\nkeep\n{% endif %}"),
    ("ws_unicode_space_strip", "a\u3000{{- 'b' }}"),
    # --- literals, printing, arithmetic ---
    ("print_basic", "{{ n }} {{ f }} {{ s }} {{ none_v }} {{ t }} {{ lst }} {{ d }} {{ empty }}"),
    ("print_literals", "{{ [1, 'a', none, true, 1.0] }} {{ (1,) }} {{ () }} {{ (1, 2) }} {{ {'k': [1, {'z': none}]} }}"),
    ("print_floats", "{{ 1.0 }} {{ 1e16 }} {{ 1.5e-5 }} {{ 0.1 + 0.2 }} {{ 1e22 }} {{ 123456789.125 }} {{ -0.0 }} {{ 1/3 }} {{ 2.5e-4 }} {{ 1e15 }}"),
    ("print_string_repr", "{{ [\"it's\", 'a\"b', 'x\\ny', 'tab\\t', 'back\\\\slash', 'é'] }}"),
    ("string_escapes", "{{ 'a\\tb\\\\c\\'d\\x41\\u00e9\\101\\q' }}|{{ \"x\\\"y\" }}|{{ 'adj' \"acent\" }}"),
    ("arith", "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 10 / 4 }} {{ 10 / 5 }} {{ 7.5 // 2 }} {{ 7.5 % 2 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }}"),
    ("arith_mixed", "{{ true + 1 }} {{ 1 + 2.0 }} {{ 3 * 'ab' }} {{ 'ab' * 2 }} {{ [1] * 3 }} {{ [1, 2] + [3] }} {{ (1,) + (2,) }} {{ 'a' + 'b' ~ 'c' }} {{ 1 ~ 2 }} {{ n - 10 }}"),
    ("precedence", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ not true or true }} {{ not (true or true) }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ -1|abs }} {{ 'a' ~ 3|string }}"),
    ("filter_binds_tighter_error", "{{ 2 + 3|string }}"),
    ("compare", "{{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ (1,) == [1] }} {{ {'a': 1, 'b': 2} == {'b': 2, 'a': 1} }} {{ none == none }} {{ 'a' != 'b' }} {{ 2 >= 2.0 }}"),
    ("in_operator", "{{ 'ell' in s }} {{ 2 in lst }} {{ 'a' in d }} {{ 'zz' not in d }} {{ 5 not in lst }} {{ 'x' in undefined_var }}"),
    ("and_or_values", "{{ 0 or 'x' }} {{ 'a' and 'b' }} {{ '' and 'b' }} {{ none or none }} {{ [] or [1] }}"),
    ("ternary", "{{ 'y' if t else 'n' }} {{ 'y' if none_v else 'n' }} [{{ 'y' if false }}] {{ (1 if false) is defined }} {{ 'a' if false else 'b' if true else 'c' }}"),
    # --- attribute / subscript / slicing ---
    ("getattr_getitem", "{{ nested.x.y[1] }} {{ nested['x']['y'][-1] }} {{ messages[0].role }} {{ messages.0.content }} {{ d.a }} {{ d['b'] }}"),
    ("dict_method_wins", "{{ d.items is callable }} {{ d['items'] }} {{ {}.get('q', 5) }} {{ d.get('a') }} {{ d.get('zz') }}"),
    ("missing_keys_undefined", "[{{ d.zz }}] [{{ d['zz'] }}] [{{ lst[10] }}] [{{ none_v.x }}] {{ d.zz is defined }} {{ lst[10] is undefined }}"),
    ("slicing", "{{ lst[1:] }} {{ lst[:-1] }} {{ lst[::-1] }} {{ lst[::2] }} {{ [1,2,3,4,5][4:1:-2] }} {{ s[:5] }} {{ s[-5:] }} {{ u[1:4] }} {{ u[::-1] }} {{ lst[5:] }} {{ (1,2,3)[1:] }} {{ s[::3] }}"),
    ("string_index", "{{ s[0] }} {{ s[-1] }} {{ u[1] }} [{{ s[100] }}]"),
    # --- undefined behaviour ---
    ("undefined_print_iter", "[{{ nope }}] [{% for x in nope %}x{% endfor %}] {{ nope is defined }} {{ nope is undefined }} {{ nope|length }} {{ not nope }} {{ nope ~ 'a' }} {{ nope|default('dflt') }} {{ nope == nope2 }}"),
    ("undefined_default_boolean", "{{ ''|default('d') }}|{{ ''|default('d', true) }}|{{ none_v|default('d') }}|{{ none_v|d('d', boolean=true) }}"),
    ("undefined_tests", "{{ nope is iterable }} {{ nope is sequence }} {{ nope is callable }} {{ nope is none }} {{ nope is string }}"),
    ("undefined_attr_error", "{{ nope.x }}"),
    ("undefined_call_error", "{{ nope() }}"),
    ("undefined_add_error", "{{ nope + 1 }}"),
    ("undefined_radd_error", "{{ 'a' + nope }}"),
    ("undefined_tojson_error", "{{ nope|tojson }}"),
    ("undefined_compare_error", "{{ nope < 1 }}"),
    ("undefined_int_error", "{{ nope|int }}"),
    ("undefined_item_error", "{{ nope[0] }}"),
    ("missing_attr_chain_error", "{{ d.zz.yy }}"),
    # --- for loops ---
    ("loop_vars", "{% for a, b in [(1,2),(3,4),(5,6)] %}{{ a }}{{ b }} {{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }} {{ loop.first }} {{ loop.last }} {{ loop.length }} {{ loop.cycle('x','y') }} {{ loop.previtem }} {{ loop.nextitem }} {{ loop.depth }};{% endfor %}"),
    ("loop_filter", "{% for x in [1,2,3,4,5,6] if x is even %}{{ loop.index }}:{{ x }}{{ ',' if not loop.last }}{% else %}none{% endfor %}"),
    ("loop_else", "{% for x in [] %}x{% else %}empty{% endfor %}|{% for x in [1] %}{{ x }}{% else %}empty{% endfor %}|{% for x in [2] if x > 5 %}{% else %}filtered-empty{% endfor %}"),
    ("loop_break_continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
    ("loop_dict_items", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}|{% for k in d %}{{ k }}{% endfor %}|{% for k, v in d|items %}{{ k }}{% endfor %}|{% for k, v in d|dictsort %}{{ k }}{% endfor %}"),
    ("loop_string", "{% for c in u %}[{{ c }}]{% endfor %}"),
    ("loop_nested_loopvars", "{% for a in [1,2] %}{% for b in 'xy' %}{{ loop.index }}{{ b }}{{ a }} {% endfor %}{{ loop.index }}|{% endfor %}"),
    ("loop_scope", "{% set x = 1 %}{% for i in [1,2] %}{{ x }}{% set x = x + 1 %}{{ x }}{% endfor %}{{ x }}|{% for i in [1] %}{% set inner = 5 %}{% endfor %}[{{ inner }}]"),
    ("loop_scope_reads_outer", "{% set x = 1 %}{% for i in [1,2] %}{% if i == 2 %}{{ x }}{% endif %}{% set x = 5 %}{% endfor %}{{ x }}"),
    ("loop_changed", "{% for p in people %}{% if loop.changed(p.age) %}[{{ p.age }}]{% endif %}{{ p.name }}{% endfor %}"),
    ("loop_recursive", "{% for item in [{'n': 'a', 'c': [{'n': 'b', 'c': [{'n': 'c', 'c': []}]}]}, {'n': 'd', 'c': []}] recursive %}{{ item.n }}{{ loop.depth }}({{ loop(item.c) }}){% endfor %}"),
    ("loop_over_none_error", "{% for x in none_v %}{% endfor %}"),
    ("loop_over_int_error", "{% for x in n %}{% endfor %}"),
    ("loop_unpack_error", "{% for a, b in [1, 2] %}{% endfor %}"),
    ("loop_unpack_count_error", "{% for a, b in [(1, 2, 3)] %}{% endfor %}"),
    ("loop_filter_lazy_namespace", "{% set ns = namespace(done=false) %}{% for x in [1,2,3] if not ns.done %}{{ x }}{% if x == 2 %}{% set ns.done = true %}{% endif %}{% endfor %}"),
    ("loop_messages_reverse", "{% for m in messages[::-1] %}{{ (messages|length - 1) - loop.index0 }}{{ m.role[0] }} {% endfor %}"),
    ("loop_previtem_undefined", "{% for m in messages %}{{ loop.previtem.role if loop.previtem else 'START' }}>{{ m.role }} {% endfor %}"),
    # --- if / set / namespace ---
    ("if_elif_else", "{% for v in [0, 1, 2, 3] %}{% if v == 0 %}zero{% elif v == 1 %}one{% elif v == 2 %}two{% else %}many{% endif %} {% endfor %}"),
    ("if_no_scope", "{% if true %}{% set w = 7 %}{% endif %}{{ w }}"),
    ("set_tuple", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c, e = [3, 4] %}{{ c }}{{ e }}{% set t2 = 1, 2 %}{{ t2 }}"),
    ("set_block", "{% set x %}a{{ 1 }}b{% endset %}[{{ x }}]{% set y | upper %}abc{% endset %}{{ y }}{% set z | trim | upper %}  q  {% endset %}[{{ z }}]"),
    ("set_block_scope", "{% set x %}{% set inner = 1 %}{% endset %}[{{ inner }}]"),
    ("namespace_basic", "{% set ns = namespace(a=1, b='x') %}{% set ns.a = ns.a + 1 %}{% for i in [1,2,3] %}{% set ns.b = ns.b ~ i %}{% endfor %}{{ ns.a }} {{ ns.b }} {{ ns }}"),
    ("namespace_empty_then_set", "{% set ns = namespace() %}{% set ns.index = 0 %}{% for m in messages %}{% set ns.index = ns.index + 1 %}{% endfor %}{{ ns.index }}"),
    ("namespace_from_dict", "{% set ns = namespace({'k': 1}, j=2) %}{{ ns.k }}{{ ns.j }}{{ ns['k'] }}"),
    ("namespace_list_concat", "{% set ns = namespace(items=[]) %}{% for m in messages %}{% set ns.items = ns.items + [m.role] %}{% endfor %}{{ ns.items|join(',') }}"),
    ("set_attr_non_namespace_error", "{% set a = 1 %}{% set a.b = 2 %}"),
    ("unpack_not_enough_error", "{% set a, b = [1] %}"),
    ("with_block", "{% with a = 1, b = 2 %}{{ a + b }}{% set c = 3 %}{% endwith %}[{{ a }}{{ c }}]"),
    ("generation_block", "{% generation %}{% set g = 2 %}gen{{ 1 }}{% endgeneration %}[{{ g }}]"),
    ("filter_block", "{% filter upper %}abc{{ 'd' }}{% endfilter %}|{% filter replace('a', 'b') | upper %}aaa{% endfilter %}"),
    ("block_tag", "{% block content %}inside{% endblock %}"),
    # --- macros ---
    ("macro_defaults_kwargs", "{% macro m(a, b=2, c='x') %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ m(1) }}|{{ m(1, 3) }}|{{ m(b=5, a=4) }}|{{ m(1, c='z') }}"),
    ("macro_varargs_kwargs", "{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k=4) }}"),
    ("macro_missing_arg", "{% macro m(a) %}[{{ a }}]{{ a is defined }}{% endmacro %}{{ m() }}"),
    ("macro_extra_kwarg_error", "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, b=2) }}"),
    ("macro_too_many_args_error", "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}"),
    ("macro_late_binding", "{% macro m() %}{{ z }}{% endmacro %}{% set z = 3 %}{{ m() }}"),
    ("macro_local_set", "{% macro m() %}{% if z is not defined %}{% set z = 4 %}{% endif %}{{ z }}{% endmacro %}{{ m() }}|{% set z = 3 %}{{ m() }}"),
    ("macro_recursion", "{% macro fact(k) %}{% if k <= 1 %}1{% else %}{{ k * fact(k - 1)|int }}{% endif %}{% endmacro %}{{ fact(6) }}"),
    ("macro_closure_in_loop", "{% for i in [1] %}{% set q = 2 %}{% macro m() %}{{ q }}{{ i }}{% endmacro %}{{ m() }}{% endfor %}"),
    ("macro_returns_string", "{% macro m() %} x {% endmacro %}[{{ m()|trim }}] {{ m() is string }} {{ m()|length }}"),
    ("macro_namespace_mutation", "{% set ns = namespace(c=0) %}{% macro bump() %}{% set ns.c = ns.c + 1 %}{% endmacro %}{{ bump() }}{{ bump() }}{{ ns.c }}"),
    ("macro_caller", "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}inner{% endcall %}"),
    ("macro_caller_args", "{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}{% call(v) each([1,2]) %}[{{ v }}]{% endcall %}"),
    ("macro_print", "{% macro m() %}{% endmacro %}{{ m.name }}"),
    # --- filters ---
    ("f_text", "{{ s|upper }} {{ s|lower }} {{ 'hello world-foo(bar'|title }} {{ 'hELLO wORLD'|capitalize }} {{ '  a b  '|trim }}|{{ 'xxaxx'|trim('x') }} {{ s|replace('o', '0') }} {{ s|replace('o', '0', 1) }} {{ s|length }} {{ u|length }} {{ u|upper }} {{ s|wordcount }}"),
    ("f_center_truncate", "[{{ 'ab'|center(7) }}] {{ 'The quick brown fox jumps over'|truncate(15) }} {{ 'The quick brown fox'|truncate(10, true) }} {{ 'short'|truncate(10) }} {{ 'abcdefghijklmnop'|truncate(10, end='>') }}"),
    ("f_join_map", "{{ lst|join(',') }} {{ people|map(attribute='name')|join('/') }} {{ lst|map('string')|join }} {{ people|map(attribute='tags.0', default='-')|list }} {{ ['a','b']|map('upper')|list }} {{ people|join(', ', attribute='age') }}"),
    ("f_select_reject", "{{ lst|select('odd')|list }} {{ lst|reject('odd')|list }} {{ [0, 1, '', 'a', none]|select|list }} {{ people|selectattr('age', 'equalto', 30)|map(attribute='name')|list }} {{ people|rejectattr('tags')|map(attribute='name')|list }} {{ people|selectattr('tags', 'defined')|list|length }} {{ lst|select('gt', 1)|list }} {{ words|select('in', ['banana', 'cherry'])|list }}"),
    ("f_sort", "{{ lst|sort }} {{ lst|sort(reverse=true) }} {{ words|sort }} {{ words|sort(case_sensitive=true) }} {{ people|sort(attribute='age')|map(attribute='name')|list }} {{ people|sort(attribute='age,name')|map(attribute='name')|list }} {{ people|sort(attribute='name')|map(attribute='name')|list }}"),
    ("f_unique_minmax", "{{ words|unique|list }} {{ words|unique(case_sensitive=true)|list }} {{ lst|max }} {{ lst|min }} {{ words|max }} {{ words|min }} {{ people|max(attribute='age') }} {{ []|max is undefined }}"),
    ("f_first_last", "{{ lst|first }} {{ lst|last }} {{ s|first }} {{ u|last }} {{ []|first is undefined }} {{ d|first }} {{ (lst|select('odd'))|first }}"),
    ("f_list_reverse", "{{ s|list|length }} {{ d|list }} {{ lst|reverse|list }} {{ s|reverse }} {{ lst|select('odd')|reverse }} {{ 'ab'|list }}"),
    ("f_numbers", "{{ -3|abs }} {{ -2.5|abs }} {{ '12'|int }} {{ 'x'|int }} {{ 'x'|int(-1) }} {{ '1.9'|int }} {{ 3.9|int }} {{ '0x1A'|int(base=16) }} {{ ' 7 '|int }} {{ '1_000'|int }} {{ '1.5'|float }} {{ 3|float }} {{ 'a'|float }} {{ true|int }}"),
    ("f_round", "{{ 2.5|round }} {{ 3.5|round }} {{ 2.567|round(2) }} {{ 2.675|round(2) }} {{ 2.5|round(0, 'floor') }} {{ 2.1|round(0, 'ceil') }} {{ 7|round }} {{ 1234.5678|round(-2) }} {{ -0.5|round }}"),
    ("f_sum_count", "{{ lst|sum }} {{ people|sum(attribute='age') }} {{ [1.5, 2]|sum }} {{ lst|sum(start=10) }} {{ lst|count }} {{ d|length }}"),
    ("f_batch_slice", "{{ [1,2,3,4,5]|batch(2)|list }} {{ [1,2,3,4,5]|batch(2, 0)|list }} {{ [1,2,3,4,5]|slice(2)|list }} {{ [1,2,3,4]|slice(3, 'x')|list }}"),
    ("f_indent", "{{ 'a\\nb\\nc'|indent }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent(2) }}|{{ 'a\\n\\nb'|indent(2, blank=true) }}|{{ 'a\\nb\\n'|indent('> ') }}"),
    ("f_escape_safe", "{{ '<a href=\"x\">&\\'</a>'|e }} {{ ('<b>'|safe) ~ '<' }} {{ ('<b>'|safe) + '<' }} {{ ('<'|e)|e }} {{ '<'|forceescape }} {{ '<b>'|safe is escaped }}"),
    ("f_string_pprint", "{{ [1, [2, 'x']]|string }} {{ {'a': 'b'}|string }} {{ none_v|string }} {{ 1.0|string }} {{ t|string }} {{ (1,)|pprint }}"),
    ("f_format", "{{ '%s-%d-%05.2f %r %%'|format('a', 3, 2.5, 'q') }} {{ '%(a)s=%(b)d'|format(a='x', b=2) }} {{ '%-5s|%5s|%x|%o|%e'|format('ab', 'cd', 255, 8, 12345.678) }} {{ '%s' % 'single' }} {{ '%s and %s' % ('a', 'b') }} {{ '%.3s' % 'abcdef' }} {{ '%c%c' % (65, 'b') }}"),
    ("f_dictsort_items", "{{ d|dictsort }} {{ {'x': 2, 'y': 1}|dictsort(by='value') }} {{ d|dictsort(reverse=true) }} {{ d|items|list }} {{ {'B': 1, 'a': 2}|dictsort }} {{ {'B': 1, 'a': 2}|dictsort(true) }}"),
    ("f_attr", "{{ messages[0]|attr('role') }}|{{ d|attr('a') }}|{{ d|attr('keys') is callable }}"),
    ("f_groupby", "{% for g in people|groupby('age') %}{{ g[0] }}:{{ g[1]|map(attribute='name')|join(',') }};{% endfor %}"),
    ("f_tojson", "{{ d|tojson }} {{ u|tojson }} {{ u|tojson(ensure_ascii=true) }} {{ [1, 2.0, none, true, 'q\"\\\\\\n\\t\\u0001\\u007f'] |tojson }} {{ (1, 2)|tojson }} {{ {}|tojson }} {{ []|tojson }}"),
    ("f_tojson_indent", "{{ {'a': [1, {}], 'b': [], 'c': {'d': 'é'}}|tojson(indent=2) }}\n{{ [1, [2]]|tojson(indent=0) }}\n{{ {'a': 1}|tojson(indent='\\t') }}\n{{ {'b': 1, 'a': {'d': 1, 'c': 2}}|tojson(sort_keys=true) }}\n{{ {'a': [1, 2]}|tojson(separators=(',', ':')) }}"),
    ("f_tojson_numbers", "{{ [1e16, 1.5e-7, 0.1, 100.0, -0.0, 9223372036854775807, 3.14159]|tojson }} {{ {1: 'a', none: 'b', true: 'c', 2.5: 'd'}|tojson }}"),
    ("f_tojson_generator_error", "{{ lst|map('string')|tojson }}"),
    ("f_tojson_namespace_error", "{{ namespace(a=1)|tojson }}"),
    ("f_length_int_error", "{{ 5|length }}"),
    ("f_generator_length_error", "{{ lst|select('odd')|length }}"),
    ("f_generator_once", "{% set g = lst|select('odd') %}{{ g|list }}{{ g|list }}"),
    ("f_unknown_filter_error", "{{ 1|nosuchfilter }}"),
    ("f_unknown_test_error", "{{ 1 is nosuchtest }}"),
    # Unknown filters/tests: a compile error outside if/inline-if; inside, an error only when they run
    # (Jinja2 compiles a stub there). Frames Jinja2 opens with Frame.inner() (loops, macros, filter and
    # set blocks, with bodies) are checked at compile time again, even inside an if.
    ("lazy_filter_if_not_taken", "{% if t and none_v %}{{ s|from_json }}{% endif %}ok"),
    ("lazy_filter_if_taken_error", "{% if t %}{{ s|from_json }}{% endif %}ok"),
    ("lazy_filter_else_not_taken", "{% if t %}a{% elif s|from_json %}b{% else %}{{ s|from_json }}{% endif %}"),
    ("lazy_filter_elif_taken_error", "{% if none_v %}a{% elif s|from_json %}b{% endif %}"),
    ("lazy_filter_condexpr", "{{ s|from_json if none_v else 'no' }} {{ 'y' if t else s|from_json }} {{ (s|from_json) if none_v }}"),
    ("lazy_filter_condexpr_taken_error", "{{ 'y' if none_v else s|from_json }}"),
    ("lazy_filter_set_in_if", "{% if none_v %}{% set z = s|from_json %}{% endif %}{% set w = s|from_json if none_v else 1 %}{{ w }}"),
    ("lazy_filter_in_loop_in_if", "{% for m in messages %}{% if m.role == 'tool' %}{{ m.content|from_json }}{% endif %}{{ m.role[0] }}{% endfor %}"),
    ("lazy_filter_loop_iter_in_if", "{% if none_v %}{% for m in messages|from_json %}{% endfor %}{% endif %}ok"),
    ("lazy_filter_with_value_in_if", "{% if none_v %}{% with a = s|from_json %}{% endwith %}{% endif %}ok"),
    ("lazy_filter_in_macro_condexpr", "{% macro f(a) %}{{ a|from_json if none_v else a }}{% endmacro %}{{ f('q') }}"),
    ("lazy_test_if_not_taken", "{% if none_v and s is nosuchtest %}a{% endif %}ok"),
    ("lazy_test_if_taken_error", "{% if s is nosuchtest %}a{% endif %}ok"),
    ("lazy_filter_args_evaluated_first_error", "{% if t %}{{ s|from_json(undefined_fn()) }}{% endif %}"),
    ("unknown_filter_loop_in_if_error", "{% if none_v %}{% for m in messages %}{{ m|from_json }}{% endfor %}{% endif %}ok"),
    ("unknown_filter_for_else_in_if_error", "{% if none_v %}{% for m in messages %}{% else %}{{ 1|from_json }}{% endfor %}{% endif %}ok"),
    ("unknown_test_loop_filter_in_if_error", "{% if none_v %}{% for m in messages if m is nosuchtest %}{% endfor %}{% endif %}ok"),
    ("unknown_filter_macro_in_if_error", "{% if none_v %}{% macro g(a=1|from_json) %}{% endmacro %}{% endif %}ok"),
    ("unknown_filter_set_block_in_if_error", "{% if none_v %}{% set b | from_json %}q{% endset %}{% endif %}ok"),
    ("unknown_filter_filter_block_in_if_error", "{% if none_v %}{% filter from_json %}q{% endfilter %}{% endif %}ok"),
    ("unknown_filter_with_body_in_if_error", "{% if none_v %}{% with a = 1 %}{{ a|from_json }}{% endwith %}{% endif %}ok"),
    ("unknown_filter_after_syntax_error", "{{ 1|from_json }}{% if %}"),
    # --- tests ---
    ("tests_types", "{{ n is number }} {{ f is float }} {{ n is integer }} {{ t is integer }} {{ t is number }} {{ t is boolean }} {{ s is string }} {{ d is mapping }} {{ lst is sequence }} {{ d is sequence }} {{ s is iterable }} {{ n is iterable }} {{ none_v is none }} {{ lst is mapping }} {{ namespace() is mapping }}"),
    ("tests_values", "{{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }} {{ t is true }} {{ 1 is true }} {{ false is false }} {{ 0 is false }} {{ 1 is eq 1 }} {{ 1 is equalto 2 }} {{ 1 is ne 2 }} {{ 2 is gt 1 }} {{ 2 is ge 2 }} {{ 1 is lt 2 }} {{ 1 is le 0 }} {{ 2 is in [1, 2] }} {{ 'ABC' is upper }} {{ 'abc' is lower }} {{ none is sameas none }} {{ true is sameas true }}"),
    ("tests_callable", "{{ s.upper is callable }} {{ range is callable }} {{ s is callable }} {{ 'upper' is filter }} {{ 'odd' is test }} {{ 'zz' is filter }}"),
    ("tests_not", "{{ nope is not defined }} {{ n is not string }} {{ not n is string }} {{ s is not none and s is string }}"),
    # --- str / dict / list methods ---
    ("str_methods_split", "{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a b c'.rsplit(' ', 1) }} {{ 'a b c'.rsplit(None, 1) }} {{ '  a b c  '.split(None, 1) }} {{ 'a\\nb\\r\\nc\\n'.splitlines() }} {{ 'x'.split('y') }} {{ ''.split() }} {{ ''.split(',') }}"),
    ("str_methods_strip", "[{{ '  x '.strip() }}] [{{ '  x '.lstrip() }}] [{{ '  x '.rstrip() }}] [{{ 'xxyxx'.strip('x') }}] [{{ '\\n\\nx\\n'.lstrip('\\n') }}] [{{ 'abcba'.rstrip('ab') }}] [{{ '<think>\\nq'.lstrip('\\n') }}]"),
    ("str_methods_find", "{{ s.startswith('He') }} {{ s.startswith(('x', 'Hel')) }} {{ s.endswith('ld') }} {{ s.find('o') }} {{ s.rfind('o') }} {{ s.find('zz') }} {{ u.find('w') }} {{ s.count('l') }} {{ s.index('W') }} {{ s.startswith('World', 6) }} {{ s.find('o', 5) }}"),
    ("str_methods_case", "{{ s.upper() }} {{ s.lower() }} {{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }} {{ 'AbC'.swapcase() }} {{ \"they're bill's\".title() }} {{ 'x1y'.title() }}"),
    ("str_methods_misc", "{{ s.replace('l', 'L') }} {{ s.replace('l', 'L', 2) }} {{ '-'.join(['a', 'b']) }} {{ 'ab'.center(6, '*') }} {{ 'ab'.ljust(4, '.') }}| {{ 'ab'.rjust(4) }} {{ '42'.zfill(5) }} {{ '-42'.zfill(5) }} {{ 'a=b=c'.partition('=') }} {{ 'a=b=c'.rpartition('=') }} {{ '123'.isdigit() }} {{ 'ab1'.isalpha() }} {{ '  '.isspace() }} {{ 'AB'.isupper() }} {{ 'prefix_x'.removeprefix('prefix_') }}"),
    ("str_format_method", "{{ '{} {}'.format(1, 'a') }} {{ '{0}{1}{0}'.format('x', 'y') }} {{ '{name}!'.format(name='n') }} {{ '{:>5}|{:<5}|{:^5}'.format('a', 'b', 'c') }} {{ '{:.2f} {:5d} {:05d} {:x} {:,}'.format(3.14159, 42, 42, 255, 1234567) }} {{ '{{}}'.format() }} {{ '{!r}'.format('q') }}"),
    ("dict_methods", "{{ d.keys()|list }} {{ d.values()|list }} {{ d.items()|list }} {{ d.keys() }} {{ d.items()|length }} {{ d.get('a', 0) }} {{ 'a' in d.keys() }}"),
    ("list_methods", "{{ lst.index(1) }} {{ [1, 1, 2].count(1) }} {{ lst.copy() }}"),
    ("list_append_unsafe_error", "{{ lst.append(4) }}"),
    ("dict_update_unsafe_error", "{{ d.update({'q': 1}) }}"),
    ("str_concat_dict_error", "{{ 'a' + d }}"),
    ("list_concat_tuple_error", "{{ [1] + (2,) }}"),
    ("int_plus_str_error", "{{ 1 + 'a' }}"),
    ("div_zero_error", "{{ 1 / 0 }}"),
    ("floordiv_zero_error", "{{ 1 // 0 }}"),
    ("mod_zero_error", "{{ 1 % 0 }}"),
    ("in_str_error", "{{ 1 in 'abc' }}"),
    ("in_none_error", "{{ 'a' in none_v }}"),
    ("lt_mixed_error", "{{ 'a' < 1 }}"),
    ("call_str_error", "{{ s() }}"),
    ("str_join_int_error", "{{ ', '.join([1, 2]) }}"),
    ("split_empty_sep_error", "{{ 'abc'.split('') }}"),
    # --- globals ---
    ("globals_range_dict", "{{ range(3)|list }} {{ range(1, 10, 3)|list }} {{ range(5, 0, -2)|list }} {{ range(3) }} {{ range(3)|length }} {{ dict(a=1, b=2) }} {{ dict([('x', 1)]) }} {{ dict({'k': 'v'}, z=0) }}"),
    ("globals_range_too_big_error", "{{ range(200000)|length }}"),
    ("globals_joiner_cycler", "{% set j = joiner('|') %}{% for x in lst %}{{ j() }}{{ x }}{% endfor %} {% set c = cycler('a', 'b') %}{{ c.next() }}{{ c.next() }}{{ c.next() }}{{ c.current }}"),
    ("globals_raise_exception_error", "before{{ raise_exception('custom failure: ' ~ n) }}after"),
    ("globals_strftime_now", "{{ strftime_now('%Y-%m-%d %H:%M:%S') }} {{ strftime_now('%d %b %Y') }} {{ strftime_now('%B %d, %Y') }} {{ strftime_now('%A %j %%') }} {{ strftime_now is defined }}"),
    ("context_overrides", "{% set messages = messages[1:] %}{{ messages|length }}{% if not tools is defined %}{% set tools = none %}{% endif %}{{ tools }}"),
    ("context_key_order", "{{ d|tojson }} {% for k in d %}{{ k }}{% endfor %}", {"d": {"zeta": 1, "alpha": 2, "mid": {"y": 1, "b": 2}}}),
    ("unicode_passthrough", "{{ '你好' ~ u }} {{ u|tojson }} {{ '🙂'|length }} {{ '🙂'|tojson(ensure_ascii=true) }}"),
    # --- more scoping / edge semantics ---
    ("macro_used_before_definition_error", "{{ m() }}{% macro m() %}x{% endmacro %}"),
    ("macro_calls_later_macro", "{% macro a() %}[{{ b() }}]{% endmacro %}{% macro b() %}B{% endmacro %}{{ a() }}"),
    ("macro_set_no_leak", "{% macro m() %}{% set leak = 1 %}{% endmacro %}{{ m() }}[{{ leak }}]"),
    ("macro_param_default_uses_outer", "{% set base = 10 %}{% macro m(x=base + 1) %}{{ x }}{% endmacro %}{{ m() }}{{ m(2) }}"),
    ("macro_default_uses_earlier_param", "{% macro m(a, b=a * 2) %}{{ a }}{{ b }}{% endmacro %}{{ m(3) }}"),
    ("macro_caller_undefined_error", "{% macro m() %}{{ caller() }}{% endmacro %}{{ m() }}"),
    ("loop_var_no_leak", "{% for a in [1, 2] %}{% endfor %}[{{ a }}][{{ loop }}]"),
    ("loop_outer_saved", "{% for a in [1, 2] %}{% set outer = loop %}{% for b in [1] %}{{ outer.index }}{{ loop.index }} {% endfor %}{% endfor %}"),
    ("loop_revindex_break", "{% for x in [1, 2, 3, 4] %}{{ loop.revindex }}{% if loop.index == 2 %}{% break %}{% endif %}{% endfor %}"),
    ("loop_cycle_empty_error", "{% for x in [1] %}{{ loop.cycle() }}{% endfor %}"),
    ("loop_in_macro_in_loop", "{% macro row(xs) %}{% for x in xs %}{{ loop.index }}{{ x }}{% endfor %}{% endmacro %}{% for r in [[1, 2], [3]] %}{{ loop.index }}:{{ row(r) }} {% endfor %}"),
    ("set_in_if_in_loop_top", "{% set found = 'no' %}{% for m in messages %}{% if m.role == 'user' %}{% set found = 'yes' %}{% endif %}{% endfor %}{{ found }}"),
    ("trim_spaces_before_newline", "{% if true %}  \nx{% endif %}"),
    ("lstrip_comment_mid_line", "text {# c #}\n  {# c2 #}\nend"),
    ("whitespace_macro_body", "{%- macro m(x) -%}\n  [{{ x }}]\n{%- endmacro -%}\n{{ m(1) }}\n{{ m(2) }}"),
    ("var_strings_with_braces", "{{ '{{' }}{{ '}}' }}{{ '{% raw %}' }}{{ {'a': {'b': 1}} }}"),
    ("truthiness", "{% for v in [0, 0.0, '', '0', [], {}, none, [0], {'a': 0}, 0.1, 'False'] %}{{ 'T' if v else 'F' }}{% endfor %}"),
    ("concat_none", "{{ 'a' ~ none }} {{ none ~ '' }} {{ 1 ~ true }} {{ [1] ~ (2,) }}"),
    ("float_printing_more", "{{ 0.1 * 3 }} {{ 1e-7 }} {{ 123456789012345678.0 }} {{ 1/3*3 }} {{ 2.0 ** 0.5 }} {{ 1e100 }} {{ 5e-324 }} {{ 1.7976931348623157e308 }} {{ 100.0 / 3 }} {{ 3.0 * 1 }}"),
    ("percent_more", "{{ '%d' % 3.7 }} {{ '%s' % none }} {{ '%s' % [1, 2] }} {{ '%5.1f|%-6d|%+d' % (3.14159, 42, 5) }} {{ '%i%%' % 50 }}"),
    ("percent_not_enough_error", "{{ '%s %s' % [1, 2] }}"),
    ("percent_too_many_error", "{{ '%s' % (1, 2) }}"),
    ("sort_mixed_error", "{{ [1, 'a']|sort }}"),
    ("unique_dict_error", "{{ [{'a': 1}]|unique|list }}"),
    ("divisibleby_zero_error", "{{ 3 is divisibleby 0 }}"),
    ("dup_dict_keys", "{{ {'a': 1, 'b': 2, 'a': 3} }} {{ {'a': 1, 'a': 2}|tojson }}"),
    ("sameas_identity", "{% set a = [1, 2] %}{% set b = a %}{{ a is sameas b }} {{ a is sameas [1, 2] }}"),
    ("str_times_bool", "{{ 'a' * true }}{{ 'a' * false }}|{{ 'a' == 1 }} {{ 1 == '1' }}"),
    ("selectattr_truthy", "{{ people|selectattr('tags')|map(attribute='name')|list }} {{ messages|selectattr('role', 'equalto', 'user')|list|last }}"),
    ("map_default_filter", "{{ [none, 'x']|map('default', 'd')|list }} {{ [none, '']|map('default', 'd', true)|list }}"),
    ("join_dict_keys", "{{ d|join('-') }} {{ (d|dictsort)|map('first')|join }}"),
    ("unicode_title_compare", "{{ 'émile zola'|title }} {{ 'é' > 'e' }} {{ 'ÀÉÎ'|lower }} {{ 'straße'|upper }} {{ 'Ωmega'|lower }}"),
    ("tojson_markup_and_strings", "{{ ('<b>'|safe)|tojson }} {{ 'a/b'|tojson }} {{ '\u2028'|tojson }} {{ '\u2028'|tojson(ensure_ascii=true) }}"),
    ("dict_items_print", "{{ d.items() }} {{ d.values() }} {{ {}.keys() }}"),
    ("range_negative", "{{ range(-3)|list }} {{ range(3, -3, -2)|list }} {{ range(0)|list }}"),
    ("nested_namespace_in_list", "{% set ns = namespace(v=[]) %}{% for i in range(3) %}{% set ns.v = ns.v + [{'i': i, 'sq': i * i}] %}{% endfor %}{{ ns.v|map(attribute='sq')|list }} {{ ns.v|tojson }}"),
    ("string_compare_chain", "{{ 'a' < 'b' < 'c' }} {{ 1 < 2 > 1 }} {{ 1 == 1 != 2 }}"),
    ("test_with_and_or", "{{ s is string and s|length > 3 }} {{ n is number or false }} {{ 'x' if nope is defined and nope else 'y' }}"),
    ("default_then_concat", "{% set acc = acc|default([]) + [1] %}{{ acc }}"),
    ("negative_index_and_slices", "{{ [1, 2, 3][-1:] }} {{ [1, 2, 3][-5:] }} {{ [1, 2, 3][:-5] }} {{ 'abc'[-2:] }} {{ [1, 2, 3][1:2:-1] }} {{ [1, 2, 3, 4][::-2] }} {{ [1, 2, 3][-1::-1] }}"),
    ("slice_step_zero_error", "{{ [1, 2][::0] }}"),
    ("call_with_star_args", "{% macro m(a, b) %}{{ a }}-{{ b }}{% endmacro %}{{ m(*[1, 2]) }} {{ m(**{'a': 3, 'b': 4}) }} {{ '{}{}'.format(*['x', 'y']) }}"),
    ("int_float_filters_more", "{{ true|float }} {{ '  3.5 '|float }} {{ 'nan'|float }} {{ '-inf'|float }} {{ '1e3'|int }} {{ 'abc'|float(1.5) }} {{ none|int }} {{ none|float }}"),
    ("abs_round_neg", "{{ -0.0|abs }} {{ -7|abs }} {{ -2.5|round }} {{ -2.567|round(1) }} {{ 0.5|round }} {{ 1.5|round }}"),
    ("wordcount_truncate_unicode", "{{ '你好 世界 foo_bar baz-qux'|wordcount }} {{ 'héllo wörld foo bar baz'|truncate(12) }}"),
    ("lstrip_blocks_with_var_same_line", "  {{ 'x' }} {% if true %}y{% endif %}\n  {% if true %}z{% endif %}"),
    ("block_minus_both_multiline", "a\n\n   {%- for i in [1, 2] -%}\n\n  {{ i }}\n\n  {%- endfor -%}\n\n b"),
    ("comment_with_tags_inside", "{# {% if %} {{ x }} #}ok"),
    ("raw_with_minus", "x   {%- raw %}  {{ y }}  {% endraw -%}   z"),
    ("for_else_with_break", "{% for x in [1, 2] %}{% break %}{% else %}else{% endfor %}done"),
    ("if_expression_test_precedence", "{{ not none is none }} {{ -2|abs }} {{ (-2)|abs }} {{ 1 + -2|abs }} {{ [1, 2]|length * 2 }}"),
    # --- idioms from other popular chat templates (Gemma 3, Llama 3/4, Qwen2-VL, Phi, DeepSeek, ...) ---
    ("idiom_llama3_content", "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}", "RICH"),
    ("idiom_gemma3_prefix", "{%- if messages[0]['role'] == 'system' -%}{%- if messages[0]['content'] is string -%}{%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}{%- else -%}{%- set first_user_prefix = messages[0]['content'][0]['text'] + '\\n\\n' -%}{%- endif -%}{%- set loop_messages = messages[1:] -%}{%- else -%}{%- set first_user_prefix = '' -%}{%- set loop_messages = messages -%}{%- endif -%}{%- for message in loop_messages -%}{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{%- endif -%}{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}{{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else '') }}{%- if message['content'] is string -%}{{ message['content'] | trim }}{%- elif message['content'] is iterable -%}{%- for item in message['content'] -%}{%- if item['type'] == 'image' -%}{{ '<start_of_image>' }}{%- elif item['type'] == 'text' -%}{{ item['text'] | trim }}{%- endif -%}{%- endfor -%}{%- endif -%}{{ '<end_of_turn>\\n' }}{%- endfor -%}", "RICH_ALT"),
    ("idiom_qwen2vl_images", "{% set image_count = namespace(value=0) %}{% for message in messages %}{% if message['content'] is string %}{{ message['content'] }}{% else %}{% for content in message['content'] %}{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}{% set image_count.value = image_count.value + 1 %}Picture {{ image_count.value }}: <|vision_start|><|image_pad|><|vision_end|>{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}{% endif %}|{% endfor %}", "RICH"),
    ("idiom_llama4_sorted_content", "{%- for message in messages %}{%- if message['content'] is string %}{{- message['content'] }}{%- else %}{%- for content in message['content'] | sort(attribute='type') %}{%- if content['type'] == 'image' %}{{- '<|image|>' }}{%- elif content['type'] == 'text' %}{{- content['text'] | trim }}{%- endif %}{%- endfor %}{%- endif %};{%- endfor %}", "RICH"),
    ("idiom_reasoning_split", "{%- for m in messages if m.role == 'assistant' %}{%- set c = m.content %}{%- if m.reasoning_content is defined and m.reasoning_content is not none %}{%- set r = m.reasoning_content %}{%- elif '</think>' in c %}{%- set r = c.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}{%- set c = c.split('</think>')[-1].lstrip('\\n') %}{%- else %}{%- set r = '' %}{%- endif %}[{{ r }}|{{ c }}]{%- endfor %}", "RICH"),
    ("idiom_tool_call_args_string_or_dict", "{%- for m in messages if m.tool_calls %}{%- for tc in m.tool_calls %}{%- set f = tc.function if tc.function is defined else tc %}{{ f.name }}({{ f.arguments if f.arguments is string else f.arguments | tojson }}){{ ', ' if not loop.last }}{%- endfor %}{%- endfor %}", "RICH"),
    ("idiom_last_user_index", "{%- set ns = namespace(last=-1) %}{%- for m in messages %}{%- if m.role == 'user' %}{%- set ns.last = loop.index0 %}{%- endif %}{%- endfor %}{{ ns.last }} {% for i in range(messages|length - 1, -1, -1) %}{{ i }}{% endfor %} {{ messages|selectattr('role', 'eq', 'system')|first|attr('content') if messages|selectattr('role', 'eq', 'system')|list else 'none' }}", "RICH"),
    ("idiom_get_and_default", "{% for m in messages %}{{ m.get('name', 'anon') }}/{{ m.get('reasoning_content') }}/{{ m['content'] | default('', true) | string | length }} {% endfor %}", "RICH"),
    ("idiom_tools_block", "{%- if tools is defined and tools is not none and tools|length > 0 %}{%- for t in tools %}{{ t.function.name }}: {{ t.function.parameters | tojson(indent=4, ensure_ascii=False) }}\n{%- for pname, pspec in t.function.parameters.properties | dictsort %}\n  {{ pname }} ({{ pspec.type }}){{ ' required' if pname in t.function.parameters.required else '' }}{% if pspec.enum is defined %} one of {{ pspec.enum | join('|') }}{% endif %}\n{%- endfor %}\n{%- endfor %}{%- endif %}", "RICH"),
    ("idiom_capitalize_roles", "{% for m in messages %}{{ m.role | capitalize }}: {{ m.content if m.content is string else m.content | map(attribute='text') | select('defined') | join(' ') }}\n{% endfor %}", "RICH_ALT"),
    ("idiom_join_lines", "{{ '\\n'.join(messages | map(attribute='role')) }}|{{ messages | map(attribute='role') | unique | join(',') }}|{{ (messages | map(attribute='role') | list)[-2:] }}", "RICH"),
    ("idiom_format_percent", "{% for m in messages %}{{ '%-10s|%s' | format(m.role, loop.index) }}\n{% endfor %}", "RICH"),
    ("idiom_is_tool_response", "{%- for message in messages %}{%- if message.role == 'tool' and (loop.index0 == 0 or messages[loop.index0 - 1].role != 'tool') %}<tools>{%- endif %}{%- if message.role == 'tool' %}<r>{{ message.content }}</r>{%- endif %}{%- if message.role == 'tool' and (loop.last or messages[loop.index0 + 1].role != 'tool') %}</tools>{%- endif %}{%- endfor %}", "RICH"),
    ("idiom_date_today", "{%- set today = strftime_now('%d %B %Y') %}Today is {{ today }}. {{ strftime_now('%A, %B %-d, %Y') }}"),
    ("idiom_messages_content_parts_text", "{% for m in messages %}{% if m.content is not string %}{% for p in m.content if p.type == 'text' %}{{ p.text }}{% endfor %}{% endif %}{% endfor %}", "RICH_ALT"),
    # --- syntax errors (line numbers are checked by the C++ tests) ---
    ("syntax_unclosed_if_error", "line1\n{% if true %}\nno end"),
    ("syntax_unknown_tag_error", "{% frobnicate %}"),
    ("syntax_bad_expr_error", "{{ 1 + }}"),
    ("syntax_unclosed_var_error", "{{ 1 "),
    ("syntax_unclosed_comment_error", "{# never closed"),
    ("syntax_unbalanced_error", "{{ (1 }}"),
    ("syntax_stray_endfor_error", "{% endfor %}"),
    ("syntax_bad_char_error", "{{ 1 ! 2 }}"),
    ("syntax_chained_is_error", "{{ 1 is odd is odd }}"),
    ("syntax_assign_literal_error", "{% set 1 = 2 %}"),
    ("syntax_elif_after_else_error", "{% if 1 %}{% else %}{% elif 2 %}{% endif %}"),
    ("syntax_unterminated_string_error", "{{ 'abc }}"),
]

RICH = {"bos_token": "<s>", "eos_token": "</s>", "add_generation_prompt": True, "messages": [
    {"role": "system", "content": "  You are helpful.  "},
    {"role": "user", "content": [{"type": "text", "text": "What is this?"}, {"type": "image", "image": "x.png"},
                                 {"type": "image_url", "image_url": {"url": "http://x"}}]},
    {"role": "assistant", "content": "<think>\nLooking.\n</think>\n\nA cat.", "name": "bot"},
    {"role": "user", "content": "Weather in Paris and Rome?"},
    {"role": "assistant", "content": "", "reasoning_content": "Two calls.", "tool_calls": [
        {"id": "a1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
        {"id": "a2", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}]},
    {"role": "tool", "tool_call_id": "a1", "content": "18C"},
    {"role": "tool", "tool_call_id": "a2", "content": "24C"},
    {"role": "assistant", "content": "Paris 18C, Rome 24C."}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Get weather",
        "parameters": {"type": "object", "properties": {"unit": {"type": "string", "enum": ["c", "f"]},
        "city": {"type": "string", "description": "City"}}, "required": ["city"]}}}]}
RICH_ALT = {"bos_token": "<s>", "messages": [
    {"role": "system", "content": [{"type": "text", "text": "Sys prompt"}]},
    {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": " Describe "}]},
    {"role": "assistant", "content": "A dog."}, {"role": "user", "content": "Thanks"}]}
NAMED = {"RICH": RICH, "RICH_ALT": RICH_ALT}

def main():
    env = make_env()
    out = {"jinja2_version": jinja2.__version__, "fixed_now": FIXED_NOW.isoformat(), "cases": []}
    for case in CASES:
        name, src = case[0], case[1]
        ctx = case[2] if len(case) > 2 else CTX
        if isinstance(ctx, str):
            ctx = NAMED[ctx]
        entry = {"name": name, "template": src, "context": ctx}
        try:
            entry["expected"] = env.from_string(src).render(**ctx)
        except Exception as e:
            entry["expected_error"] = f"{type(e).__name__}: {e}"
            if hasattr(e, "lineno") and e.lineno:
                entry["error_line"] = e.lineno
        if name.endswith("_error") != ("expected_error" in entry):
            print(f"warning: {name}: error expectation mismatch: {entry.get('expected_error')}", file=sys.stderr)
        out["cases"].append(entry)
    with open(sys.argv[1], "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
    print(f"{len(out['cases'])} cases")

if __name__ == "__main__":
    main()
