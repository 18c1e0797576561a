#!/usr/bin/env python3
"""Prompt-lookup (n-gram) speculative decoding: tokenmill against llama-server, one stream, same file, same
prompt, greedy. Four servers run at once (each engine with and without n-gram speculation) and the same
client alternates between them request by request for --reps rounds; the figure is the median decode tok/s
(completion tokens / (wall time - time to first token), streaming). It also checks that the engines'
greedy texts agree (the comparison only means something where they do).

usage: bench/lookup_compare.py --model M.gguf --llama-server PATH [--tokenmill build/tokenmill]
                               [--threads 2] [--reps 5] [--max-tokens 256] [--prompt-file F]
tokenmill: --speculative-config '{"method":"ngram","num_speculative_tokens":K,"prompt_lookup_max":N,
"prompt_lookup_min":1}'; llama-server: --spec-type ngram-simple --spec-ngram-simple-size-n N
--spec-ngram-simple-size-m K (its draft is the K tokens after the latest earlier match of the last N).
"""
import argparse, json, os, socket, statistics, subprocess, sys, time, urllib.request

ap = argparse.ArgumentParser()
ap.add_argument("--model", required=True)
ap.add_argument("--llama-server", required=True)
ap.add_argument("--tokenmill", default=os.path.join(os.path.dirname(__file__), "..", "build", "tokenmill"))
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--reps", type=int, default=5)
ap.add_argument("--max-tokens", type=int, default=256)
ap.add_argument("--k", type=int, default=4)
ap.add_argument("--n", type=int, default=3)
ap.add_argument("--prompt-file")
ap.add_argument("--texts", help="write each engine's greedy text to this JSON file")
a = ap.parse_args()

prompt = open(a.prompt_file).read() if a.prompt_file else (
    "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n\n" * 4 + "def mul(a, b):\n")

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def start(argv, port):
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(1200):
        if p.poll() is not None: sys.exit(f"server exited: {' '.join(argv)}")
        try:
            if urllib.request.urlopen(url + "/health", timeout=2).status == 200: return p, url
        except Exception: pass
        time.sleep(0.1)
    sys.exit(f"server not healthy: {' '.join(argv)}")

def complete(url):
    body = json.dumps({"prompt": prompt, "max_tokens": a.max_tokens, "temperature": 0, "ignore_eos": True,
                       "stream": True, "stream_options": {"include_usage": True}}).encode()
    req = urllib.request.Request(url + "/v1/completions", body, {"content-type": "application/json"})
    t0 = time.perf_counter(); ttft = None; text = []; n = 0
    with urllib.request.urlopen(req, timeout=600) as r:
        for line in r:
            line = line.strip()
            if not line.startswith(b"data:") or line == b"data: [DONE]": continue
            j = json.loads(line[5:])
            for c in j.get("choices", []):
                if c.get("text"):
                    if ttft is None: ttft = time.perf_counter() - t0
                    text.append(c["text"])
            if j.get("usage"): n = j["usage"]["completion_tokens"]
    wall = time.perf_counter() - t0
    return "".join(text), n, (n - 1) / (wall - ttft)

spec = json.dumps({"method": "ngram", "num_speculative_tokens": a.k, "prompt_lookup_max": a.n, "prompt_lookup_min": 1})
T = [a.tokenmill, "serve", "--model", a.model, "--threads", str(a.threads), "--max-model-len", "4096", "--port"]
L = [a.llama_server, "-m", a.model, "-t", str(a.threads), "-tb", str(a.threads), "-c", "4096", "-np", "1",
     "--no-webui", "--log-disable", "--port"]
configs = {
    "tokenmill": T,
    "tokenmill ngram": T[:2] + ["--speculative-config", spec] + T[2:],
    "llama-server": L,
    "llama-server ngram-simple": L[:1] + ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", str(a.n),
                                          "--spec-ngram-simple-size-m", str(a.k)] + L[1:],
}
servers = {}
try:
    for name, argv in configs.items():
        port = free_port()
        servers[name] = start(argv + [str(port)], port)
    texts, tps = {}, {name: [] for name in configs}
    for name, (_, url) in servers.items(): texts[name] = complete(url)[0]  # warm-up
    for r in range(a.reps):
        for name, (_, url) in servers.items():
            text, n, v = complete(url)
            tps[name].append(v)
            print(f"round {r} {name}: {n} tokens, {v:.1f} tok/s", file=sys.stderr, flush=True)
finally:
    for p, _ in servers.values(): p.terminate()
same = lambda x, y: texts[x] == texts[y]
if a.texts: json.dump(texts, open(a.texts, "w"), indent=1)
print(f"greedy texts: tokenmill == tokenmill ngram: {same('tokenmill', 'tokenmill ngram')}; "
      f"llama-server == llama-server ngram-simple: {same('llama-server', 'llama-server ngram-simple')}; "
      f"tokenmill == llama-server: {same('tokenmill', 'llama-server')}")
print("| engine | decode tok/s (median) | min-max | vs its own no-speculation |")
print("|---|---|---|---|")
for name in configs:
    base = "tokenmill" if name.startswith("tokenmill") else "llama-server"
    m = statistics.median(tps[name])
    print(f"| {name} | {m:.1f} | {min(tps[name]):.1f}-{max(tps[name]):.1f} | {m / statistics.median(tps[base]):.2f} |")
r = statistics.median(tps["tokenmill ngram"]) / statistics.median(tps["llama-server ngram-simple"])
print(f"tokenmill ngram / llama-server ngram-simple: {r:.2f}")
