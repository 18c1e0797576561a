#!/usr/bin/env python3
"""Tool-call goldens for every template in templates/, rendered by real Jinja2 in Hugging Face's environment
(make_chat_goldens.py's: sandbox, trim/lstrip_blocks, loopcontrols, HF tojson/raise_exception/strftime_now at
FIXED_NOW, {% generation %}). goldens/ covers one call with dict arguments; these add what agents send back:
arguments as a JSON string (what the OpenAI API returns), parallel calls mixing both forms, several tool
results in a row, and a call alongside text. Same file format as goldens/.
Usage: make_tool_goldens.py TEMPLATE_DIR OUT_DIR"""
import json, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_chat_goldens import FIXED_NOW, TOOLS, make_env, render

TOOLS2 = TOOLS + [{"type": "function", "function": {
    "name": "get_time", "description": "Current local time in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]

def call(cid, name, args):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}

CASES = [
    {"name": "tool_call_string_arguments", "tools": TOOLS, "messages": [
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [
            call("call_1", "get_weather", "{\"city\": \"Paris\", \"unit\": \"celsius\"}")]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"temp\": 18}"}],
     "add_generation_prompt": True},
    {"name": "parallel_calls_mixed_arguments", "tools": TOOLS2, "messages": [
        {"role": "system", "content": "You are a travel assistant."},
        {"role": "user", "content": "Weather and time in Rome?"},
        {"role": "assistant", "content": "", "tool_calls": [
            call("call_a", "get_weather", {"city": "Rome"}),
            call("call_b", "get_time", "{\"city\": \"Rome\"}")]},
        {"role": "tool", "tool_call_id": "call_a", "name": "get_weather", "content": "24C, sunny"},
        {"role": "tool", "tool_call_id": "call_b", "name": "get_time", "content": "14:05"},
        {"role": "assistant", "content": "It is 24C and sunny in Rome, and 14:05."},
        {"role": "user", "content": "Thanks."}], "add_generation_prompt": True},
    # As vLLM hands it to the template (arguments parsed, content ""), with the 9-character alphanumeric
    # ids Mistral's templates demand (its tool cases above all raise on OpenAI-style ids).
    {"name": "tool_call_as_vllm_passes_it_9char_ids", "tools": TOOLS2, "messages": [
        {"role": "user", "content": "Weather and time in Rome?"},
        {"role": "assistant", "content": "", "tool_calls": [
            call("a1B2c3D4e", "get_weather", {"city": "Rome", "unit": "celsius"}),
            call("Z9y8X7w6v", "get_time", {"city": "Rome"})]},
        {"role": "tool", "tool_call_id": "a1B2c3D4e", "name": "get_weather", "content": "24C"},
        {"role": "tool", "tool_call_id": "Z9y8X7w6v", "name": "get_time", "content": "14:05"}],
     "add_generation_prompt": True},
    {"name": "tool_call_with_text", "tools": TOOLS, "messages": [
        {"role": "user", "content": "Is it raining in Oslo?"},
        {"role": "assistant", "content": "Let me check.", "tool_calls": [
            call("call_9", "get_weather", {"city": "Oslo", "unit": "celsius"})]},
        {"role": "tool", "tool_call_id": "call_9", "name": "get_weather", "content": "rain, 7C"}],
     "add_generation_prompt": True},
]

def main():
    tdir, odir = sys.argv[1], sys.argv[2]
    os.makedirs(odir, exist_ok=True)
    env = make_env()
    for n in sorted(f for f in os.listdir(tdir) if f.endswith(".jinja")):
        src = open(os.path.join(tdir, n), encoding="utf-8").read()
        out = {"template": n, "fixed_now": FIXED_NOW.isoformat(), "cases": []}
        for case in CASES:
            res, ctx = render(env, src, case)
            out["cases"].append({"name": case["name"], "context": ctx, **res})
        with open(os.path.join(odir, n[:-len(".jinja")] + ".json"), "w", encoding="utf-8") as f:
            json.dump(out, f, ensure_ascii=False, indent=1)
        ok = sum("expected" in c for c in out["cases"])
        print(f"{n}: {ok}/{len(CASES)} rendered")

if __name__ == "__main__":
    main()
