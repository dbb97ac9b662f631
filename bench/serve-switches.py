#!/usr/bin/env python3
"""Context switches of a brisk server's threads per generated token, and its throughput,
over N non-streaming greedy requests, CONC at a time (default 16; several values alternate:
CONC="1 16"), on brisk-tiny: what each token's hand-off from the engine thread to a
request's HTTP thread costs the machine.
Usage: [CONC="1 16"] bench/serve-switches.py BRISK_BINARY [N=48] [ROUNDS=5]   (several
binaries: one per argument before N, alternated round by round)."""
import concurrent.futures as cf
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

MODEL = os.path.join(os.path.dirname(__file__), "..", "models", "brisk-tiny-q8_0.gguf")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def switches(pid):
    total = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{t}/status") as f:
            for line in f:
                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                    total += int(line.split()[1])
    return total


def one_round(binary, n, conc):
    port = free_port()
    srv = subprocess.Popen([binary, "serve", "-m", MODEL, "--port", str(port), "-t", "2", "--parallel", "16"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1/completions"
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": 128, "temperature": 0,
                       "ignore_eos": True}).encode()

    def request(_):
        r = urllib.request.urlopen(urllib.request.Request(url, body, {"Content-Type": "application/json"}))
        return json.load(r)["usage"]["completion_tokens"]

    try:
        for _ in range(100):  # until it answers (a warm-up request)
            try:
                request(0)
                break
            except OSError:
                time.sleep(0.1)
        c0, t0 = switches(srv.pid), time.time()
        with cf.ThreadPoolExecutor(conc) as ex:
            tokens = sum(ex.map(request, range(n)))
        dt, c1 = time.time() - t0, switches(srv.pid)
    finally:
        srv.terminate()
        srv.wait()
    return tokens / dt, (c1 - c0) / tokens


def main():
    args = sys.argv[1:]
    binaries = [a for a in args if not a.isdigit()]
    nums = [int(a) for a in args if a.isdigit()]
    n, rounds = (nums + [48, 5][len(nums):])[:2]
    for r in range(rounds):
        for b in binaries:
            for conc in (int(c) for c in os.environ.get("CONC", "16").split()):
                tps, per_token = one_round(b, max(n * conc // 16, 6), conc)
                print(f"round {r + 1} {b} {conc} at a time: {tps:.0f} tok/s, {per_token:.2f} context switches a token",
                      flush=True)


if __name__ == "__main__":
    main()
