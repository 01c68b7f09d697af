"""KV cache events as vLLM publishes them (--kv-events-config): a subscriber written against vLLM's
msgspec schema (tools/reference/vllm_kv_events.py: the classes of vllm/distributed/kv_events.py, field for field)
decodes the ZMQ stream of a running server and sees the prefix cache: BlockStored for a prompt's full
blocks with the prompt's token ids, hashes a router can recompute (docs/vllm-surface.md, "KV
events"), the GDN snapshot blocks in their own group, BlockRemoved when the small cache evicts, and
the replay socket returning what the live subscription missed."""
import json
import sys
from pathlib import Path
import struct
import subprocess
import time

import msgspec
import pytest
import requests
import zmq

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "reference"))
from vllm_kv_events import AllBlocksCleared, BlockRemoved, BlockStored, KVEventBatch  # noqa: E402

MODEL = "fp4serve-demo"
BLOCK = 16
ROOT_HASH = 0x243F6A8885A308D3


DECODER = msgspec.msgpack.Decoder(type=KVEventBatch)


# ---- the block hash, as documented: XXH64 (seed 0) of parent (u64 LE), tokens (i32 LE), extra-key
# count (u64 LE) and the extra keys (u64 LE) ----
_P1, _P2, _P3, _P4, _P5 = (11400714785074694791, 14029467366897019727, 1609587929392839161,
                           9650029242287828579, 2870177450012600261)
_M = 2**64 - 1


def _rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & _M


def _round(acc, lane):
    return (_rotl((acc + lane * _P2) & _M, 31) * _P1) & _M


def xxh64(data: bytes, seed: int = 0) -> int:
    n, i = len(data), 0
    u64 = lambda at: struct.unpack_from("<Q", data, at)[0]  # noqa: E731
    if n >= 32:
        v = [(seed + _P1 + _P2) & _M, (seed + _P2) & _M, seed, (seed - _P1) & _M]
        while i + 32 <= n:
            v = [_round(v[k], u64(i + 8 * k)) for k in range(4)]
            i += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M
        for x in v:
            h = ((h ^ _round(0, x)) * _P1 + _P4) & _M
    else:
        h = (seed + _P5) & _M
    h = (h + n) & _M
    while i + 8 <= n:
        h = (_rotl(h ^ _round(0, u64(i)), 27) * _P1 + _P4) & _M
        i += 8
    if i + 4 <= n:
        h = (_rotl(h ^ ((struct.unpack_from("<I", data, i)[0] * _P1) & _M), 23) * _P2 + _P3) & _M
        i += 4
    while i < n:
        h = (_rotl(h ^ ((data[i] * _P5) & _M), 11) * _P1) & _M
        i += 1
    h ^= h >> 33
    h = (h * _P2) & _M
    h ^= h >> 29
    h = (h * _P3) & _M
    return h ^ (h >> 32)


def block_hashes(tokens, extra_first=()):
    out, parent = [], ROOT_HASH
    for b in range(len(tokens) // BLOCK):
        extra = list(extra_first) if b == 0 else []
        data = struct.pack("<Q", parent) + struct.pack(f"<{BLOCK}i", *tokens[b * BLOCK:(b + 1) * BLOCK])
        data += struct.pack("<Q", len(extra)) + b"".join(struct.pack("<Q", k) for k in extra)
        parent = xxh64(data)
        out.append(parent)
    return out


def test_xxh64_matches_the_reference_vectors():
    assert xxh64(b"") == 0xEF46DB3751D8E999
    assert xxh64(b"a") == 0xD24EC4F1A98C6E5B
    assert xxh64(b"abc") == 0x44BC2CF5AD770999
    # Inputs of 32 bytes and more (a block's are 80) are checked against the engine's libxxhash in
    # test_stores_removals_and_replay.


# ---- the subscriber ----
class Subscriber:
    def __init__(self, endpoint, topic):
        self.ctx = zmq.Context()
        self.sub = self.ctx.socket(zmq.SUB)
        self.sub.setsockopt(zmq.SUBSCRIBE, topic.encode())
        self.sub.connect(endpoint)
        self.topic = topic.encode()
        self.batches = []  # (seq, payload bytes, KVEventBatch)

    def poll(self, timeout_s):
        deadline = time.time() + timeout_s
        while self.sub.poll(max(0, int((deadline - time.time()) * 1000))):
            topic, seq, payload = self.sub.recv_multipart()
            assert topic == self.topic and len(seq) == 8
            self.batches.append((int.from_bytes(seq, "big"), payload, DECODER.decode(payload)))

    def events(self):
        return [e for _, _, b in self.batches for e in b.events]

    def wait_for(self, predicate, timeout_s=30):
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            if predicate(self.events()):
                return
            self.poll(0.2)
        raise AssertionError(f"timed out; events so far: {self.events()}")

    def close(self):
        self.sub.close(linger=0)
        self.ctx.term()


def stored(events, group):
    return [e for e in events if isinstance(e, BlockStored) and e.group_idx == group]


def stored_hashes(events, group):
    return [h for e in stored(events, group) for h in e.block_hashes]


def removed_hashes(events, group):
    return [h for e in events if isinstance(e, BlockRemoved) and e.group_idx == group for h in e.block_hashes]


def complete(server, tokens, **extra):
    r = requests.post(server.url + "/v1/completions", timeout=120,
                      json={"model": MODEL, "prompt": tokens, "max_tokens": 1, "temperature": 0, **extra})
    assert r.status_code == 200, r.text


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def events_server(make_server):
    pub, replay = free_port(), free_port()
    config = {"enable_kv_cache_events": True, "publisher": "zmq", "endpoint": f"tcp://*:{pub}",
              "replay_endpoint": f"tcp://*:{replay}", "topic": "kv-events", "buffer_steps": 1000}
    # 128 blocks of 16 tokens: max_model_len 2048 just fits, so a few prompts evict.
    server = make_server("--kv-events-config", json.dumps(config), "--block-size", str(BLOCK),
                         "--num-gpu-blocks-override", "128")
    sub = Subscriber(f"tcp://127.0.0.1:{pub}", "kv-events")
    time.sleep(0.5)  # the subscription reaches the publisher (ZeroMQ's slow joiner)
    yield server, sub, f"tcp://127.0.0.1:{replay}"
    sub.close()


def test_stores_removals_and_replay(events_server):
    server, sub, replay_endpoint = events_server
    prompt = [1000 + i for i in range(100)]  # 6 full blocks + 4 tokens
    complete(server, prompt)
    sub.wait_for(lambda ev: len(stored_hashes(ev, 0)) >= 6 and stored(ev, 1))
    first = stored(sub.events(), 0)[0]
    expected = block_hashes(prompt)
    assert first.block_hashes == expected, "the documented hash (XXH64 chain) is what the engine publishes"
    assert first.parent_block_hash is None
    assert first.token_ids == prompt[:96]
    assert first.block_size == BLOCK
    assert (first.lora_id, first.lora_name, first.medium) == (None, None, "GPU")
    assert first.extra_keys == [None] * 6
    assert first.kv_cache_spec_kind == "full_attention"
    # The GDN state snapshot at 96 tokens (the last block boundary before the prompt's last token):
    # group 1, kind "mamba", under the hash of the block it ends at.
    snap = stored(sub.events(), 1)[0]
    assert snap.block_hashes == [expected[5]]
    assert snap.parent_block_hash == expected[4]
    assert snap.token_ids == prompt[80:96]
    assert snap.kv_cache_spec_kind == "mamba"

    # A salted request: other hashes, the salt's key as the first block's extra key.
    complete(server, prompt, cache_salt="tenant-a")
    sub.wait_for(lambda ev: any(e.extra_keys and e.extra_keys[0] for e in stored(ev, 0)))
    salted = next(e for e in stored(sub.events(), 0) if e.extra_keys and e.extra_keys[0])
    salt_key = xxh64(b"tenant-a") | 1
    assert salted.extra_keys[0] == (salt_key,)
    assert salted.block_hashes == block_hashes(prompt, extra_first=[salt_key])

    # Other prompts fill the 128 blocks: the first prompt's blocks are evicted and reported.
    for k in range(6):
        complete(server, [20000 + 1000 * k + i for i in range(480)])
        sub.poll(0.1)
        if set(expected) <= set(removed_hashes(sub.events(), 0)):
            break
    sub.wait_for(lambda ev: set(expected) <= set(removed_hashes(ev, 0)))
    removed = removed_hashes(sub.events(), 0)
    assert all(removed.count(h) == 1 for h in expected)
    # Every removal is of a hash stored before, once per store (a router's reference count holds).
    stores = stored_hashes(sub.events(), 0)
    for h in set(removed):
        assert removed.count(h) <= stores.count(h), h

    # The same prompt again is stored again under the same hashes: identical prompts match.
    n_before = len(stored(sub.events(), 0))
    complete(server, prompt)
    sub.wait_for(lambda ev: any(e.block_hashes[:1] == expected[:1] for e in stored(ev, 0)[n_before:]))
    again = [e for e in stored(sub.events(), 0)[n_before:] if e.block_hashes[:1] == expected[:1]][0]
    assert again.block_hashes == expected and again.token_ids == prompt[:96]

    # Live sequence numbers are consecutive.
    seqs = [s for s, _, _ in sub.batches]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))

    # Replay from 0 returns what the live subscription missed (the start-up AllBlocksCleared, seq 0,
    # sent before it connected) and the same bytes for what it saw, then the end marker.
    ctx = zmq.Context.instance()
    dealer = ctx.socket(zmq.DEALER)
    dealer.connect(replay_endpoint)
    dealer.send_multipart([b"", (0).to_bytes(8, "big")])
    replayed = {}
    while True:
        assert dealer.poll(5000), "no replay answer"
        frames = dealer.recv_multipart()
        assert frames[0] == b"" and len(frames) == 4
        if frames[2] == (-1).to_bytes(8, "big", signed=True):
            assert frames[1] == b"" and frames[3] == b""
            break
        assert frames[1] == b"kv-events"
        replayed[int.from_bytes(frames[2], "big")] = frames[3]
    dealer.close(linger=0)
    assert 0 in replayed and seqs[0] > 0
    start = DECODER.decode(replayed[0])
    assert [type(e) for e in start.events] == [AllBlocksCleared]
    assert start.data_parallel_rank == 0
    for seq, payload, _ in sub.batches:
        assert replayed[seq] == payload


@pytest.mark.parametrize("config,field", [
    ('{"enable_kv_cache_events": true, "hwm": "many"}', "hwm"),
    ('{"enable_kv_cache_events": true, "publisher": "kafka"}', "publisher"),
    ('{"enable_kv_cache_events": true, "endpoint": "localhost:5557"}', "endpoint"),
    ('{"enable_kv_cache_events": true, "max_queue_size": 0}', "max_queue_size"),
    ('{"enable_kv_cache_events": true, "topics": "x"}', "topics"),
    ('[1, 2]', "JSON object"),
])
def test_a_bad_config_is_refused_naming_the_field(fp4serve_binary, config, field):
    r = subprocess.run([str(fp4serve_binary), "serve", "--kv-events-config", config], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode != 0
    assert "--kv-events-config" in r.stderr + r.stdout and field in r.stderr + r.stdout, r.stderr + r.stdout
