#!/usr/bin/env python3
"""Figures of issue 24 (long conversations and documents) on stories260K, for bench/RESULTS.md.

  bench/long_context.py --tokenmill build/tokenmill [--turns 50] [--doc-tokens 100000]

1. Map-reduce: writes a story document of about --doc-tokens tokens (paragraphs of stories260K's own
   greedy text, numbered so that chunks differ) and runs `tokenmill summarize DOC --json`; prints the
   per-stage table (generations, tokens, seconds).
2. History compression: starts `tokenmill serve --max-model-len 8192` and sends a --turns-turn chat
   three times: without compression (the whole history is the prompt), with "context_management":
   {"compress": true} the first time (the summary is written) and again for the next turn (the cached
   summary is reused), prefix caching off so every TTFT is a whole prefill. Prints prompt tokens (= KV cache tokens held by the request), the KV bytes they
   take (the memory plan's bytes per token), and time to first token (streaming, median of --reps).
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def post(url, body, stream=False):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    t0 = time.perf_counter()
    try:
        r = urllib.request.urlopen(req, timeout=600)
    except urllib.error.HTTPError as e:
        sys.exit(f"{url}: {e.code} {e.read().decode()[:300]}")
    with r:
        if not stream:
            return json.loads(r.read()), time.perf_counter() - t0, None
        ttft, usage = None, None
        for line in r:
            line = line.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            ev = json.loads(line[6:])
            if ttft is None and ev.get("choices") and ev["choices"][0].get("delta", {}).get("content"):
                ttft = time.perf_counter() - t0
            if ev.get("usage"):
                usage = ev["usage"]
        return usage, time.perf_counter() - t0, ttft


def map_reduce(args, tmp):
    para = ("Once upon a time, there was a little girl named Lily. She loved to play outside in the sunshine. "
            "One day, she saw a big red ball in the park. She ran to it and kicked it very high.")
    doc_path = os.path.join(tmp, "doc.txt")
    with open(doc_path, "w") as f:
        n = 0
        i = 0
        while n < args.doc_tokens:
            f.write(f"Story {i}. {para}\n\n")
            n += 78  # about 78 stories260K tokens per paragraph (the result reports the real count)
            i += 1
    t0 = time.perf_counter()
    out = subprocess.run([args.tokenmill, "summarize", doc_path, "--json", "-q", "--threads", str(args.threads)],
                         capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    r = json.loads(out.stdout)
    print(f"\n### map-reduce: {r['document_tokens']} document tokens, {r['chunks']} chunks, wall {wall:.1f} s\n")
    print("| stage | level | generations | prompt tokens | completion tokens | seconds |")
    print("|---|---|---|---|---|---|")
    for s in r["stages"]:
        print(f"| {s['stage']} | {s['level']} | {s['inputs']} | {s['prompt_tokens']} | {s['completion_tokens']} | {s['seconds']:.2f} |")
    u = r["usage"]
    print(f"| total | | | {u['prompt_tokens']} | {u['completion_tokens']} | {r['seconds']:.2f} |")


def compression(args):
    port = free_port()
    srv = subprocess.Popen([args.tokenmill, "serve", "--port", str(port), "--max-model-len", "8192",
                            "--threads", str(args.threads), "--kv-cache-memory", "256MiB",
                            "--compress-threshold", "0.25", "--compress-max-tokens", "64", "--no-prefix-caching"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(base + "/health", timeout=1)
                break
            except Exception:
                time.sleep(0.1)
        info = json.loads(urllib.request.urlopen(base + "/ui/info").read())
        plan = info["models"][0]["memory_plan"]
        per_token = plan["kv_bytes"] / plan["kv_tokens"]
        msgs = [{"role": "system", "content": "You tell short stories."}]
        for i in range(args.turns):
            msgs.append({"role": "user", "content": f"Tell me what Lily did on day {i} with her dog in the park."})
            msgs.append({"role": "assistant", "content": f"On day {i} Lily and her dog ran in the park and played with a ball."})
        msgs.append({"role": "user", "content": "What did they do next?"})
        nxt = msgs + [{"role": "assistant", "content": "They went home."}, {"role": "user", "content": "And then?"}]
        rows = []

        def run(name, messages, compress, reps):
            ttfts, usage = [], None
            for _ in range(reps):
                body = {"messages": messages, "max_tokens": 16, "temperature": 0, "stream": True,
                        "stream_options": {"include_usage": True}, "context_management": {"compress": compress}}
                usage, _, ttft = post(base + "/v1/chat/completions", body, stream=True)
                ttfts.append(ttft)
            rows.append((name, usage, statistics.median(ttfts)))

        run("whole history", msgs, False, args.reps)
        run("compressed, summary written", msgs, True, 1)
        run("compressed, cached summary (next turn)", nxt, True, args.reps)
        print(f"\n### history compression: {args.turns}-turn chat, KV {per_token:.0f} bytes/token\n")
        print("| request | prompt tokens | KV held | TTFT (ms) | compression |")
        print("|---|---|---|---|---|")
        for name, u, ttft in rows:
            c = u.get("compression")
            cs = "-" if not c else (f"{c['compressed_messages']} messages -> {c['summary_tokens']}-token summary"
                                    f"{' (cached)' if c['cached'] else ''}")
            print(f"| {name} | {u['prompt_tokens']} | {u['prompt_tokens'] * per_token / 1024:.0f} KiB | {ttft * 1000:.1f} | {cs} |")
    finally:
        srv.terminate()
        srv.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenmill", default="build/tokenmill")
    ap.add_argument("--turns", type=int, default=50)
    ap.add_argument("--doc-tokens", type=int, default=100000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--skip-map-reduce", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if not args.skip_map_reduce:
            map_reduce(args, tmp)
        compression(args)


if __name__ == "__main__":
    sys.exit(main())
