#!/usr/bin/env python3
"""A scripted OpenAI-compatible chat endpoint for the tests, on loopback.

    openai_server.py SCENARIO.json REQUESTS.jsonl

Answers every POST (…/chat/completions) with the scenario's replies in order (the last one
repeats), logs each request as a JSON line (its number, arrival time, path, Authorization header
and body), and prints the port it listens on as its first line. A reply is one of:

    {"content": "…", "usage": {"prompt_tokens": N, "completion_tokens": M}}
    {"status": 429, "headers": {"Retry-After": "1"}, "body": {…}}
    {"hang": SECONDS}     (answers nothing for that long)
"""

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

with open(sys.argv[1]) as f:
    REPLIES = json.load(f)["replies"]
LOG = sys.argv[2]
LOCK = threading.Lock()
COUNT = [0]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        length = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(length) or b"{}")
        with LOCK:
            n = COUNT[0]
            COUNT[0] += 1
            with open(LOG, "a") as log:
                log.write(json.dumps({
                    "n": n,
                    "time": time.time(),
                    "path": self.path,
                    "auth": self.headers.get("Authorization"),
                    "body": body,
                }) + "\n")
        reply = REPLIES[min(n, len(REPLIES) - 1)]
        if "hang" in reply:
            time.sleep(reply["hang"])
            self.close_connection = True
            return
        status = reply.get("status", 200)
        if status == 200:
            payload = {
                "id": f"chatcmpl-{n}",
                "object": "chat.completion",
                "model": body.get("model"),
                "choices": [{
                    "index": 0,
                    "message": {"role": "assistant", "content": reply["content"]},
                    "finish_reason": "stop",
                }],
                "usage": reply.get("usage", {"prompt_tokens": 100, "completion_tokens": 10}),
            }
        else:
            payload = reply.get("body", {"error": {"message": f"scripted HTTP {status}"}})
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in reply.get("headers", {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print(server.server_address[1], flush=True)
server.serve_forever()
