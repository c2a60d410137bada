#!/usr/bin/env python3
"""Checks of a running `slurm-train serve` (test/integration/serve.bats), with the standard library,
PyTorch and h5py:

  serve_check.py predict-all PORT MODEL TEST_H5   every test image through /predict, in requests of
                                                  1,000 rows: the classes examples/load_in_pytorch.py's
                                                  model gives, probabilities within 1e-5
  serve_check.py bad-requests PORT                each bad request answered its 4xx with a JSON error
                                                  naming what was wrong, and a good one after them
  serve_check.py request PORT METHOD PATH [BODY] [TOKEN]   prints "STATUS BODY"
  serve_check.py wait-metric PORT TOKEN LINE SECONDS        asks /metrics every 20 ms until it has
                                                  the line LINE; exits 1 after SECONDS without it
"""
import http.client
import json
import os
import sys
import time


def request(port, method, path, body=None, headers=None, host="127.0.0.1"):
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    conn.request(method, path, body=body, headers=headers or {})
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


def main():
    command, port = sys.argv[1], sys.argv[2]
    if command == "predict-all":
        predict_all(port, sys.argv[3], sys.argv[4])
    elif command == "bad-requests":
        bad_requests(port)
    elif command == "request":
        method, path = sys.argv[3], sys.argv[4]
        body = sys.argv[5].encode() if len(sys.argv) > 5 and sys.argv[5] else None
        headers = {"Authorization": f"Bearer {sys.argv[6]}"} if len(sys.argv) > 6 else {}
        status, data, _ = request(port, method, path, body, headers)
        print(status, data.decode("utf-8", "replace"))
    elif command == "wait-metric":
        wait_metric(port, sys.argv[3], sys.argv[4], sys.argv[5])
    else:
        sys.exit(f"unknown command {command}")


if __name__ == "__main__":
    main()
