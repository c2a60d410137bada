#!/usr/bin/env python3
"""Checks of a running `slurm-train serve` (test/integration/serve.bats), with the standard library,
PyTorch and h5py:

  serve_check.py predict-all PORT MODEL TEST_H5   every test image through /predict, in requests of
                                                  1,000 rows: the classes examples/load_in_pytorch.py's
                                                  model gives, probabilities within 1e-5
  serve_check.py bad-requests PORT                each bad request answered its 4xx with a JSON error
                                                  naming what was wrong, and a good one after them
  serve_check.py request PORT METHOD PATH [BODY] [TOKEN]   prints "STATUS BODY" (TOKEN "": none)
  serve_check.py wait-metric PORT TOKEN LINE SECONDS        asks /metrics every 20 ms until it has
                                                  the line LINE; exits 1 after SECONDS without it
Hostile clients, each followed by a good /predict that must be answered 200:
  serve_check.py nested PORT PATH DEPTH           a body whose "data" (/predict) or "tokens"
                                                  (/generate) nests DEPTH arrays: 400
  serve_check.py chunked PORT MB PID              MB of a chunked body: 413 before it is all sent,
                                                  serve's (PID) peak memory up by less than 100 MB
  serve_check.py gzip-bomb PORT MB                MB of zeros gzipped (Content-Encoding: gzip): 415
  serve_check.py headers PORT N                   a request with N header fields: 431
  serve_check.py slow-loris PORT N SOURCE         N connections from SOURCE (a loopback address)
                                                  trickling a header a byte at a time; meanwhile a
                                                  request from 127.0.0.1 answered within a second
The token: TOKEN where given, else the environment's SERVE_TOKEN (the file serve made), if any.
"""
import http.client
import json
import os
import select
import socket
import sys
import threading
import time
import zlib


def request(port, method, path, body=None, headers=None, host="127.0.0.1"):
    headers = dict(headers or {})
    if "Authorization" not in headers and os.environ.get("SERVE_TOKEN"):
        headers["Authorization"] = f"Bearer {os.environ['SERVE_TOKEN']}"
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    conn.request(method, path, body=body, headers=headers)
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, data, response


def predict_all(port, model_path, test_h5):
    import h5py
    import numpy as np
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
    from load_in_pytorch import load_model
    model, (input_scale, mean, inv_stddev) = load_model(model_path)
    with h5py.File(test_h5, "r") as f:
        images = f["images"][()]
    raw = images.reshape(len(images), -1)
    x = (torch.from_numpy(raw.astype(np.float32)) * np.float32(input_scale) - np.float32(mean)) * np.float32(inv_stddev)
    with torch.no_grad():
        expected = torch.softmax(model(x), dim=1).numpy()
    classes, probabilities = [], []
    for first in range(0, len(raw), 1000):
        body = json.dumps({"data": raw[first:first + 1000].tolist()})
        status, data, _ = request(port, "POST", "/predict", body, {"Content-Type": "application/json"})
        if status != 200:
            sys.exit(f"/predict of rows {first}..: HTTP {status}: {data[:300]!r}")
        answer = json.loads(data)
        classes += answer["prediction"]
        probabilities += answer["probabilities"]
    classes = np.array(classes)
    probabilities = np.array(probabilities)
    if classes.shape != (len(raw),) or probabilities.shape != expected.shape:
        sys.exit(f"shapes {classes.shape} and {probabilities.shape}; expected ({len(raw)},) and {expected.shape}")
    differing = int(np.sum(classes != expected.argmax(axis=1)))
    worst = float(np.max(np.abs(probabilities - expected)))
    print(f"{len(raw)} images: {differing} classes differ from PyTorch's; probabilities at most {worst:.2e} apart")
    if differing or worst > 1e-5:
        sys.exit(1)


# (method, path, body, status, words the error must contain)
BAD_REQUESTS = [
    ("POST", "/predict", b'{"data": [[1, 2', 400, "not JSON"),
    ("POST", "/predict", b"\xff\xfe", 400, "not JSON"),
    ("POST", "/predict", b"[]", 400, "expected a JSON object"),
    ("POST", "/predict", b'{"data": [[1, 2, 3]]}', 400, "data[0] has 3 numbers; the model takes 784"),
    ("POST", "/predict", json.dumps({"data": [[0] * 783 + ["x"]]}).encode(), 400, "data[0][783] is a string"),
    ("POST", "/predict", json.dumps({"data": [[0] * 783 + [1e39]]}).encode(), 400, "float32"),
    ("POST", "/predict", b'{"data": [[' + b"0," * 783 + b"1e999]]}", 400, "1e999"),
    ("POST", "/predict", b'{"data": [[' + b"0," * 783 + b"NaN]]}", 400, "not JSON"),
    ("POST", "/predict", b'{"data": [], "extra": 1}', 400, 'unknown field "extra"'),
    ("POST", "/predict", json.dumps({"data": [[0] * 784] * 1025}).encode(), 413, "at most 1024"),
    ("POST", "/predict", b'{"data": "' + b"x" * (9 << 20) + b'"}', 413, "over"),
    ("POST", "/generate", b'{"prompt": "a"}', 404, "serves a mlp model"),
    ("GET", "/predict", None, 405, "POST only"),
    ("DELETE", "/health", None, 405, "GET only"),
    ("GET", "/no/such/path", None, 404, "no /no/such/path here"),
]


def bad_requests(port):
    failures = 0
    for method, path, body, status, words in BAD_REQUESTS:
        got, data, response = request(port, method, path, body)
        try:
            error = json.loads(data)["error"]
        except (ValueError, KeyError, TypeError):
            error = None
        ok = got == status and error is not None and words in error
        ok = ok and response.getheader("Content-Type", "").startswith("application/json")
        print(f"{'ok' if ok else 'WRONG'}: {method} {path} {len(body or b'')} bytes -> {got} {data[:160]!r}")
        failures += not ok
    # Alive, and still right.
    got, data, _ = request(port, "POST", "/predict", json.dumps({"data": [[0] * 784]}))
    print(f"after them: /predict -> {got}")
    if got != 200 or len(json.loads(data)["prediction"]) != 1:
        failures += 1
    sys.exit(1 if failures else 0)


def wait_metric(port, token, line, seconds):
    # One process asking in a loop: a request in flight for half a second is seen, where a new
    # interpreter for each look takes a good part of that to start.
    deadline = time.monotonic() + float(seconds)
    while time.monotonic() < deadline:
        status, data, _ = request(port, "GET", "/metrics", None, {"Authorization": f"Bearer {token}"})
        if status == 200 and line in data.decode("utf-8", "replace").splitlines():
            return
        time.sleep(0.02)
    sys.exit(f"/metrics had no line {line!r} within {seconds} s")


def auth_line():
    token = os.environ.get("SERVE_TOKEN")
    return f"Authorization: Bearer {token}\r\n" if token else ""


def raw_answer(sock, seconds=30):
    """The status and body of the answer on a raw socket (read until it is closed)."""
    sock.settimeout(seconds)
    data = b""
    try:
        while True:
            part = sock.recv(65536)
            if not part:
                break
            data += part
    except (ConnectionResetError, socket.timeout):
        pass
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1]) if head.startswith(b"HTTP/1.1 ") else 0
    return status, body.decode("utf-8", "replace")


def still_serving(port, path="/predict"):
    if path == "/generate":
        status, data, _ = request(port, "POST", path, json.dumps({"prompt": "a", "tokens": 4}))
        print(f"then a good /generate -> {status}")
        return status == 200 and "text" in json.loads(data)
    status, data, _ = request(port, "POST", "/predict", json.dumps({"data": [[0] * 784]}))
    print(f"then a good /predict -> {status}")
    return status == 200 and len(json.loads(data)["prediction"]) == 1


def expect(port, status, words, got_status, got_body, path="/predict"):
    print(f"answer: {got_status} {got_body[:200]}")
    ok = got_status == status and words in got_body
    ok = still_serving(port, path) and ok
    sys.exit(0 if ok else 1)


def nested(port, path, depth):
    depth = int(depth)
    field = b'"data": ' if path == "/predict" else b'"prompt": "a", "tokens": '
    body = b"{" + field + b"[" * depth + b"]" * depth + b"}"
    print(f"a body of {len(body)} bytes nesting {depth} arrays")
    try:
        status, data, _ = request(port, "POST", path, body, {"Content-Type": "application/json"})
    except (ConnectionError, http.client.HTTPException) as e:
        print(f"WRONG: no answer ({e!r}); serve is gone")
        sys.exit(1)
    expect(port, 400, "deeper than 32 levels", status, data.decode("utf-8", "replace"), path)


def peak_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise SystemExit(f"no VmHWM in /proc/{pid}/status")


def chunked(port, mb, pid):
    total, chunk = int(mb) << 20, b"x" * (64 << 10)
    before = peak_kb(pid)
    sock = socket.create_connection(("127.0.0.1", int(port)))
    sock.sendall(f"POST /predict HTTP/1.1\r\nHost: x\r\n{auth_line()}Content-Type: application/json\r\n"
                 "Transfer-Encoding: chunked\r\n\r\n".encode())
    sent = 0
    try:
        while sent < total:
            if select.select([sock], [], [], 0)[0]:
                break  # answered: refused before the end
            sock.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
            sent += len(chunk)
        else:
            sock.sendall(b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass
    status, body = raw_answer(sock)
    sock.close()
    grown_mb = (peak_kb(pid) - before) / 1024
    print(f"sent {sent >> 20} MB of {int(mb)} MB; serve's peak memory grew by {grown_mb:.1f} MB")
    if sent >= total or grown_mb >= 100:
        print("WRONG: the body was taken whole, or serve's memory grew by 100 MB or more")
        status = -1
    expect(port, 413, "over", status, body)


def gzip_bomb(port, mb):
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(1 << 20)
    body = b"".join(packer.compress(zeros) for _ in range(int(mb))) + packer.flush()
    print(f"{int(mb)} MB of zeros in {len(body)} bytes of gzip")
    status, data, _ = request(port, "POST", "/predict", body,
                              {"Content-Type": "application/json", "Content-Encoding": "gzip"})
    expect(port, 415, "Content-Encoding gzip", status, data.decode("utf-8", "replace"))


def many_headers(port, n):
    fields = "".join(f"X-Field-{i}: {i}\r\n" for i in range(int(n)))
    sock = socket.create_connection(("127.0.0.1", int(port)))
    try:
        sock.sendall(f"GET /health HTTP/1.1\r\nHost: x\r\n{auth_line()}{fields}\r\n".encode())
    except (BrokenPipeError, ConnectionResetError):
        pass
    status, body = raw_answer(sock)
    sock.close()
    expect(port, 431, "request line and headers are over", status, body)


def slow_loris(port, n, source):
    slow, refused = [], 0
    for _ in range(int(n)):
        s = socket.socket()
        s.bind((source, 0))
        s.connect(("127.0.0.1", int(port)))
        s.setblocking(False)
        s.sendall(b"POST /predict HTTP/1.1\r\nHost: x\r\n")
        slow.append(s)
    # Trickle a byte of a header on every connection each 0.2 s while the good request is made.
    started, sent = time.monotonic(), 0
    done = []

    def good():
        t0 = time.monotonic()
        status, _, _ = request(port, "POST", "/predict", json.dumps({"data": [[0] * 784]}))
        done.append((status, time.monotonic() - t0))

    client = None
    while time.monotonic() - started < 3:
        for s in slow:
            try:
                s.send(b"X")
                sent += 1
            except (BlockingIOError, BrokenPipeError, ConnectionResetError, OSError):
                pass
        if client is None and time.monotonic() - started > 0.5:
            client = threading.Thread(target=good)
            client.start()
        time.sleep(0.2)
    client.join(30)
    for s in slow:
        try:
            s.setblocking(True)
            s.settimeout(0.05)
            if s.recv(64).startswith(b"HTTP/1.1 429"):
                refused += 1
        except OSError:
            pass
        s.close()
    status, answered_in = done[0] if done else (0, None)
    print(f"{n} slow connections from {source} ({refused} refused with 429); a request from 127.0.0.1 meanwhile: "
          f"{status} in {answered_in if answered_in is None else round(answered_in, 3)} s")
    ok = status == 200 and answered_in is not None and answered_in < 1
    ok = still_serving(port) and ok
    sys.exit(0 if ok else 1)


def main():
    command, port = sys.argv[1], sys.argv[2]
    if command == "predict-all":
        predict_all(port, sys.argv[3], sys.argv[4])
    elif command == "bad-requests":
        bad_requests(port)
    elif command == "request":
        method, path = sys.argv[3], sys.argv[4]
        body = sys.argv[5].encode() if len(sys.argv) > 5 and sys.argv[5] else None
        headers = {}
        if len(sys.argv) > 6 and sys.argv[6]:
            headers = {"Authorization": f"Bearer {sys.argv[6]}"}
        elif len(sys.argv) > 6:
            os.environ.pop("SERVE_TOKEN", None)  # "": no token at all
        status, data, _ = request(port, method, path, body, headers)
        print(status, data.decode("utf-8", "replace"))
    elif command == "wait-metric":
        wait_metric(port, sys.argv[3], sys.argv[4], sys.argv[5])
    elif command == "nested":
        nested(port, sys.argv[3], sys.argv[4])
    elif command == "chunked":
        chunked(port, sys.argv[3], sys.argv[4])
    elif command == "gzip-bomb":
        gzip_bomb(port, sys.argv[3])
    elif command == "headers":
        many_headers(port, sys.argv[3])
    elif command == "slow-loris":
        slow_loris(port, sys.argv[3], sys.argv[4])
    else:
        sys.exit(f"unknown command {command}")


if __name__ == "__main__":
    main()
