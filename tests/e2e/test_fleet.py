"""A fleet: two fp4serve replicas on loopback behind a real router from PyPI (vllm-project's
vllm-router, the Rust one, from .venv-fleet), driven over HTTP as a client of the router would.
Which replica served a request is read from each replica's own vLLM counters
(vllm:request_success_total), never from the router, so the tests check the router's routing
against what the servers did. The replicas publish vLLM's KV events (--kv-events-config), which the
router's kv_aware policy subscribes to. The replica-kill test runs last: it takes replica 2 down."""
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]
ROUTER = ROOT / ".venv-fleet" / "bin" / "vllm-router"
MODEL = "fp4serve-demo"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Router:
    """vllm-router over the given worker URLs with one policy; its log goes to log_dir."""

    def __init__(self, workers, policy, log_dir, extra_args=()):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(log_dir) / f"router-{policy}-{self.port}.log"
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [str(ROUTER), "--worker-urls", *workers, "--policy", policy, "--host", "127.0.0.1",
             "--port", str(self.port), "--prometheus-host", "127.0.0.1", "--prometheus-port", str(free_port()),
             "--log-level", "warning", *extra_args],
            # The kv_aware policy loads the tokenizer from a local model directory: never the hub.
            stdout=self.log, stderr=subprocess.STDOUT, env=dict(os.environ, HF_HUB_OFFLINE="1"))
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vllm-router exited with {self.proc.returncode}:\n{self.log_path.read_text()}")
            try:
                if requests.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"vllm-router did not become healthy:\n{self.log_path.read_text()}")

    def complete(self, prompt, headers=None, max_tokens=2):
        r = requests.post(self.url + "/v1/completions", headers=headers or {}, timeout=60,
                          json={"model": MODEL, "prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True})
        assert r.status_code == 200, r.text
        return r.json()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def metric_values(url, name):
    """Every sample of `name` on the server's /metrics: [(labels dict, value)]."""
    text = requests.get(url + "/metrics", timeout=10).text
    out = []
    for labels, value in re.findall(rf"^{re.escape(name)}(?:\{{([^}}]*)\}})? (\S+)$", text, flags=re.M):
        out.append((dict(re.findall(r'(\w+)="([^"]*)"', labels)), float(value)))
    return out


def served(replica) -> float:
    return sum(v for _, v in metric_values(replica.url, "vllm:request_success_total"))


def served_all(fleet):
    return [served(r) for r in fleet["replicas"]]


def delta(before, after):
    return [round(a - b) for a, b in zip(after, before)]


@pytest.fixture(scope="module")
def fleet(make_server, tmp_path_factory):
    if not ROUTER.exists():
        pytest.fail(f"{ROUTER} is missing: scripts/setup.sh makes .venv-fleet from tests/e2e/requirements-fleet.txt")
    # Both at once on an empty model cache, as replicas of one machine start: each makes the demo
    # model and the first to finish wins (the other must neither fail nor serve a half-made one).
    cache = tmp_path_factory.mktemp("fleet-cache")
    replicas, errors = [None, None], []
    # Each replica binds its KV event PUB and replay sockets (vLLM binds a `*` host; the router
    # connects to tcp://127.0.0.1:port, the only form it takes).
    kv_ports = [(free_port(), free_port()) for _ in range(2)]

    def start(i):
        pub, replay = kv_ports[i]
        kv_events = {"enable_kv_cache_events": True, "publisher": "zmq", "endpoint": f"tcp://*:{pub}",
                     "replay_endpoint": f"tcp://*:{replay}"}
        try:
            replicas[i] = make_server("--max-num-seqs", "4", "--kv-events-config", json.dumps(kv_events),
                                      env={"FP4SERVE_CACHE": str(cache)})
        except Exception as e:  # reported below, in the test's thread
            errors.append(e)

    starters = [threading.Thread(target=start, args=(i,)) for i in range(2)]
    for t in starters:
        t.start()
    for t in starters:
        t.join(180)
    assert not errors, errors
    assert [p.name for p in cache.iterdir()] == ["demo-model"], "a partial demo model was left behind"
    log_dir = tmp_path_factory.mktemp("routers")
    routers = {}

    def router(policy):
        if policy not in routers:
            extra = []
            if policy == "kv_aware":
                # The router tokenizes each prompt with the served model's own tokenizer and chat
                # template (a local directory), and indexes the replicas' KV events.
                extra = ["--kv-event-block-size", "16", "--kv-event-model", str(cache / "demo-model")]
                for r, (pub, replay) in zip(replicas, kv_ports):
                    extra += ["--kv-event-source", f"{r.url}=tcp://127.0.0.1:{pub}",
                              "--kv-event-replay-source", f"{r.url}=tcp://127.0.0.1:{replay}"]
            routers[policy] = Router([r.url for r in replicas], policy, log_dir, extra)
        return routers[policy]

    yield {"replicas": replicas, "router": router}
    for r in routers.values():
        r.stop()


def test_round_robin_spreads_requests_over_the_replicas(fleet):
    router = fleet["router"]("round_robin")
    before = served_all(fleet)
    for i in range(8):
        assert router.complete(f"request {i}")["usage"]["completion_tokens"] == 2
    assert delta(before, served_all(fleet)) == [4, 4]


def test_a_session_header_pins_each_session_to_one_replica(fleet):
    router = fleet["router"]("consistent_hash")
    homes = set()
    for session in ("alice", "bob", "carol", "dave", "erin", "frank"):
        before = served_all(fleet)
        for turn in range(3):
            router.complete(f"turn {turn} of {session}", headers={"X-Session-ID": session})
        d = delta(before, served_all(fleet))
        assert sorted(d) == [0, 3], f"session {session} was split over the replicas: {d}"
        homes.add(d.index(3))
    assert homes == {0, 1}, "every session landed on the same replica: the hash does not spread"


def test_a_shared_prefix_goes_to_one_replica_and_hits_its_prefix_cache(fleet):
    router = fleet["router"]("cache_aware")
    preamble = ("You are a careful assistant. The following conversation shares this long system preamble, "
                "so a prefix-aware router should keep it on the replica that already holds its KV blocks. ") * 3
    for topic in ("rivers", "mountains"):
        before = served_all(fleet)
        hits_before = [sum(v for _, v in metric_values(r.url, "vllm:prefix_cache_hits_total")) for r in fleet["replicas"]]
        for q in range(3):
            router.complete(f"{topic}: {preamble} Question {q}?")
        d = delta(before, served_all(fleet))
        assert sorted(d) == [0, 3], f"prefix {topic} was split over the replicas: {d}"
        home = fleet["replicas"][d.index(3)]
        hits = sum(v for _, v in metric_values(home.url, "vllm:prefix_cache_hits_total"))
        assert hits > hits_before[d.index(3)], "the second and third request did not reuse the first one's blocks"


def prefix_hits(replica) -> float:
    return sum(v for _, v in metric_values(replica.url, "vllm:prefix_cache_hits_total"))


def test_kv_aware_routing_follows_the_replicas_kv_events(fleet):
    # Each prefix is first sent straight to one replica, past the router: the router never routed
    # it, so only that replica's BlockStored events can tell it where the prefix is. The router
    # keys blocks by the events' token_ids (not by our block hashes) and tokenizes the prompt, or
    # the chat with its template, itself (docs/vllm-surface.md §2.3).
    router = fleet["router"]("kv_aware")
    replicas = fleet["replicas"]
    time.sleep(1.0)  # its ZMQ subscriptions connect after /health answers; a missed store is lost
    alpha = "Alpha field notes on river deltas, tides, silt, estuaries and the birds of the marsh. " * 6
    bravo = "Bravo service manual for alpine huts: glaciers, moraines, passes, ropes and stoves. " * 6
    charlie = "Charlie, a chat assistant for clock makers: escapements, pendulums, gears and springs. " * 6

    def completion(prefix):
        return lambda question: ("/v1/completions", {"prompt": f"{prefix} {question}"})

    def chat(system):
        return lambda question: ("/v1/chat/completions", {"messages": [
            {"role": "system", "content": system}, {"role": "user", "content": question}]})

    def send(url, request, question):
        path, body = request(question)
        r = requests.post(url + path, timeout=60, json={"model": MODEL, "max_tokens": 2, "ignore_eos": True, **body})
        assert r.status_code == 200, r.text

    cases = [  # (name, request with a shared prefix, the replica that holds the prefix)
        ("alpha", completion(alpha), 1),
        ("bravo", completion(bravo), 0),
        ("charlie (chat)", chat(charlie), 1),
    ]
    for _, request, home in cases:
        send(replicas[home].url, request, "Seed?")
    time.sleep(0.5)  # the events reach the router's index
    for name, request, home in cases:
        before, hits_before = served_all(fleet), prefix_hits(replicas[home])
        for q in range(3):
            send(router.url, request, f"Question {q}?")
        d = delta(before, served_all(fleet))
        want = [0, 0]
        want[home] = 3
        assert d == want, f"{name}: the router did not follow the KV events to replica {home + 1}: {d}"
        assert prefix_hits(replicas[home]) > hits_before, "the routed requests did not hit the prefix cache"


def test_metrics_carry_the_names_and_labels_routers_read(fleet):
    # What the Gateway API Inference Extension's endpoint picker (and production-stack, llm-d) scrape:
    # queue depth, running requests, KV-cache usage, and cache_config_info's block_size/num_gpu_blocks.
    for replica in fleet["replicas"]:
        for name in ("vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc"):
            samples = metric_values(replica.url, name)
            assert samples, f"{name} missing on {replica.url}"
            assert all(labels.get("model_name") == MODEL for labels, _ in samples), samples
            assert all(v >= 0 for _, v in samples)
        usage = metric_values(replica.url, "vllm:kv_cache_usage_perc")[0][1]
        assert 0.0 <= usage <= 1.0  # a fraction, as vLLM reports it (despite the name)
        [(info, value)] = metric_values(replica.url, "vllm:cache_config_info")
        assert value == 1.0
        assert int(info["block_size"]) > 0 and int(info["num_gpu_blocks"]) > 0, info


def test_a_replica_killed_under_load_is_routed_around(fleet):
    router = fleet["router"]("round_robin")
    survivor, victim = fleet["replicas"]
    results = []  # (start time, status or exception name)
    stop = threading.Event()

    def load():
        while not stop.is_set():
            t = time.time()
            try:
                r = requests.post(router.url + "/v1/completions", timeout=30,
                                  json={"model": MODEL, "prompt": "load", "max_tokens": 8, "ignore_eos": True})
                results.append((t, r.status_code))
            except requests.RequestException as e:
                results.append((t, type(e).__name__))

    threads = [threading.Thread(target=load) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(1.5)
    served_before_kill = served(survivor)
    killed_at = time.time()
    victim.proc.send_signal(signal.SIGKILL)
    victim.proc.wait(10)
    time.sleep(3)
    stop.set()
    for t in threads:
        t.join(60)
    after = [status for t, status in results if t > killed_at + 0.5]
    assert len(after) >= 4, f"too little load after the kill: {results}"
    assert all(status == 200 for status in after), f"requests after the kill failed: {after}"
    # Requests in flight on the victim when it died: the router retries them on the survivor (they
    # are not streams), so at most those few may fail, never the load as a whole.
    failed = [status for _, status in results if status != 200]
    assert len(failed) <= len(threads), failed
    assert served(survivor) - served_before_kill >= len(after)
