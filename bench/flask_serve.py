"""flask_serve.py: the peer of `slurm-train serve` in bench/serve.sh, a classifier served as a
typical Python service does it: Flask (Debian's python3-flask, its own threaded server: a thread a
connection, and werkzeug 2.2 closes each connection after its answer) around the model in PyTorch
(Debian's python3-torch), loaded with examples/load_in_pytorch.py's load_model from the same
model file.

    /usr/bin/python3 bench/flask_serve.py MODEL --port P [--threads N]

The same JSON contract as serve's:
  POST /predict  {"data": [[784 raw pixel values 0..255], ...]}
                 -> {"prediction": [classes], "probabilities": [[10 floats], ...]}
                 the model file's normalisation x = (raw * input_scale - mean) * inv_stddev in
                 float32, as load_in_pytorch.py does; softmax probabilities, argmax classes
  GET  /health   {"status": "ok", ...}
No batching across requests: each request runs the model on its own rows, under torch.no_grad.
The request log of werkzeug is off (nothing printed per request).
"""
import argparse
import logging
import os
import sys

import numpy as np
import torch
from flask import Flask, jsonify, request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
from load_in_pytorch import load_model  # noqa: E402


def make_app(model_path):
    model, (input_scale, mean, inv_stddev) = load_model(model_path)
    inputs = model[0].in_features
    scale, mean, inv_stddev = np.float32(input_scale), np.float32(mean), np.float32(inv_stddev)
    app = Flask(__name__)

    @app.post("/predict")
    def predict():
        body = request.get_json(silent=True)
        if not isinstance(body, dict) or not isinstance(body.get("data"), list) or not body["data"]:
            return jsonify(error='expected {"data": [[numbers], ...]}'), 400
        try:
            raw = np.asarray(body["data"], dtype=np.float32)
        except (TypeError, ValueError):
            return jsonify(error="\"data\" is not an array of rows of numbers"), 400
        if raw.ndim != 2 or raw.shape[1] != inputs:
            return jsonify(error=f"expected rows of {inputs} numbers"), 400
        x = (torch.from_numpy(raw) * scale - mean) * inv_stddev
        with torch.no_grad():
            probabilities = torch.softmax(model(x), dim=1)
        return jsonify(prediction=probabilities.argmax(dim=1).tolist(), probabilities=probabilities.tolist())

    @app.get("/health")
    def health():
        return jsonify(status="ok", model=model_path, inputs=inputs, classes=model[-1].out_features)

    return app


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    app = make_app(args.model)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    app.run(host="127.0.0.1", port=args.port, threaded=True)


if __name__ == "__main__":
    main()
