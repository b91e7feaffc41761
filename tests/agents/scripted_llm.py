#!/usr/bin/env python3
"""A scripted model endpoint on loopback for driving real agent CLIs in tests.

Serves the Anthropic Messages API (`POST /v1/messages`, streamed as server-sent events or not;
what Claude Code calls), the OpenAI chat completions API (`POST /v1/chat/completions`; what
aider calls through litellm, and opencode through its openai-compatible provider), the OpenAI
Responses API (`POST /v1/responses`, streamed; what Codex calls) and the Gemini API (`POST
/v1beta/models/M:generateContent`, `:streamGenerateContent`, `:countTokens`; what Gemini CLI
calls). It answers from a scenario, by request content, never by order alone, so side requests
a CLI makes (titles, routing, token counts) do not derail it:

- A conversation is the one whose messages hold the conference prompt (the marker
  "## How to work"). The first time a conversation is seen it takes the next step of the
  scenario; retries of the same request get the same step.
- A step's `actions` are tool calls, one per turn (the turn counts the calls already made after
  the prompt): Read, Edit (`old` to `new`), Write (`content`) of `file`, and Shell (`command`).
  Each API speaks them in its CLI's tools: Claude Code's Read/Edit/Write (relative paths
  resolved against the working directory named in its system prompt); Codex's exec_command
  (`cat`, and `apply_patch` for Edit and Write); Gemini CLI's read_file/replace/write_file/
  run_shell_command; opencode's read/edit/write/bash. After the last action, the step's `say`
  is the final text.
- OpenAI chat without tools (aider): the step's `reply` is the assistant's whole answer (e.g.
  SEARCH/REPLACE blocks), given again when aider re-asks after adding the files it names to the
  chat; when aider reports that an edit did not apply, the answer is `say`.
- Anything else (no prompt, a JSON-schema side request) gets a short text or an object of the
  schema.

Every request is logged as one JSON line (path, kind, step, turn, model, tools) to `log`; with
SCRIPTED_LLM_DUMP_DIR set, every POST (path, headers, body) is also saved there, one file each,
to see what a CLI sends. Each model call reports 1000 input and 100 output tokens
(SCRIPTED_LLM_REASONING of the output counted as reasoning, in the Responses API).

Usage: scripted_llm.py SCENARIO.json   (writes the bound port to scenario["port_file"])
"""

import hashlib
import json
import os
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MARKER = "## How to work"
SCENARIO = {}
CONVERSATIONS = {}
LOCK = threading.Lock()
USAGE_IN = 1000
USAGE_OUT = 100


def text_of(content):
    if isinstance(content, str):
        return content
    out = []
    for block in content or []:
        if isinstance(block, dict):
            if block.get("type") in ("text", "input_text", "output_text"):
                out.append(block.get("text", ""))
            elif block.get("type") == "tool_result":
                out.append(text_of(block.get("content")))
    return "\n".join(out)


def conversation(messages):
    """(step index, turn) of the conference conversation, or None."""
    for i, m in enumerate(messages):
        if m.get("role") == "user" and MARKER in text_of(m.get("content")):
            key = hashlib.sha256(text_of(m.get("content")).encode()).hexdigest()
            with LOCK:
                if key not in CONVERSATIONS:
                    CONVERSATIONS[key] = len(CONVERSATIONS)
                step = CONVERSATIONS[key]
            turn = sum(1 for n in messages[i + 1:] if n.get("role") == "assistant")
            return step, turn
    return None


def step_of(index):
    steps = SCENARIO.get("steps", [])
    if index < len(steps):
        return steps[index]
    return {"actions": [], "reply": "Nothing more to try.", "say": "Nothing more to try."}


def log(entry):
    path = SCENARIO.get("log")
    if path:
        with LOCK, open(path, "a") as f:
            f.write(json.dumps(entry) + "\n")


def working_directory(body):
    system = body.get("system")
    text = system if isinstance(system, str) else text_of(system)
    text += "\n" + "\n".join(text_of(m.get("content")) for m in body.get("messages", []))
    m = re.search(r"[Ww]orking directory:\s*(\S+)", text)
    return m.group(1) if m else os.getcwd()


def anthropic_answer(body):
    """The content blocks and stop reason for a Messages request."""
    tools = [t.get("name") for t in body.get("tools") or []]
    conv = conversation(body.get("messages", [])) if "Edit" in tools else None
    if conv is None:
        log({"api": "anthropic", "kind": "side", "model": body.get("model"), "tools": len(tools)})
        return [{"type": "text", "text": "ok"}], "end_turn"
    step_index, turn = conv
    step = step_of(step_index)
    actions = step.get("actions", [])
    log({"api": "anthropic", "kind": "main", "step": step_index, "turn": turn,
         "model": body.get("model"), "tools": len(tools)})
    if os.environ.get("SCRIPTED_LLM_DUMP"):
        with open(os.environ["SCRIPTED_LLM_DUMP"], "w") as f:
            json.dump(body, f)
    if turn >= len(actions):
        return [{"type": "text", "text": step.get("say", "Done.")}], "end_turn"
    action = actions[turn]
    cwd = working_directory(body)
    path = action["file"]
    if not path.startswith("/"):
        path = os.path.normpath(os.path.join(cwd, path))
    if action["tool"] == "Read":
        args = {"file_path": path}
    elif action["tool"] == "Edit":
        args = {"file_path": path, "old_string": action["old"], "new_string": action["new"]}
    else:
        args = {"file_path": path, "content": action["content"]}
    block = {"type": "tool_use", "id": "toolu_%02d_%02d" % (step_index, turn),
             "name": action["tool"], "input": args}
    return [{"type": "text", "text": "Working on it."}, block], "tool_use"


def openai_tool_call(body):
    """The next tool call of an OpenAI chat request that offers tools (opencode): the step's
    actions as read, edit, write and bash calls, None once they are done (then `say`)."""
    conv = conversation(body.get("messages", []))
    if conv is None:
        return None, "ok"
    step_index, turn = conv
    step = step_of(step_index)
    actions = step.get("actions", [])
    log({"api": "openai", "kind": "main", "step": step_index, "turn": turn,
         "model": body.get("model"), "tools": len(body.get("tools") or [])})
    if turn >= len(actions):
        return None, step.get("say", "Done.")
    a = actions[turn]
    if a["tool"] == "Read":
        name, args = "read", {"filePath": a["file"]}
    elif a["tool"] == "Edit":
        name, args = "edit", {"filePath": a["file"], "oldString": a["old"], "newString": a["new"]}
    elif a["tool"] == "Shell":
        name, args = "bash", {"command": a["command"], "description": "run it"}
    else:
        name, args = "write", {"filePath": a["file"], "content": a["content"]}
    call = {"index": 0, "id": "call_%02d_%02d" % (step_index, turn), "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)}}
    return call, None


def openai_answer(body):
    conv = conversation(body.get("messages", []))
    if conv is None:
        log({"api": "openai", "kind": "side", "model": body.get("model")})
        return "ok"
    step_index, turn = conv
    step = step_of(step_index)
    log({"api": "openai", "kind": "main", "step": step_index, "turn": turn,
         "model": body.get("model")})
    # aider asks again after adding the files an answer names to the chat (the edit is made
    # then), and tells the model when an edit did not apply (the step's `say` answers that).
    last_user = next((text_of(m.get("content")) for m in reversed(body.get("messages", []))
                      if m.get("role") == "user"), "")
    if turn > 0 and ("failed to match" in last_user or "did not conform" in last_user):
        return step.get("say", "Done.")
    return step.get("reply", "Nothing to change.")


def codex_patch(action):
    """An apply_patch call (through Codex's exec_command) for an Edit or Write action."""
    if action["tool"] == "Edit":
        body = "*** Update File: %s\n@@\n-%s\n+%s\n" % (action["file"], action["old"], action["new"])
    else:
        lines = action["content"].rstrip("\n").split("\n")
        body = "*** Add File: %s\n%s\n" % (action["file"], "\n".join("+" + l for l in lines))
    return "apply_patch <<'EOF'\n*** Begin Patch\n%s*** End Patch\nEOF\n" % body


def responses_answer(body):
    """The output items of an OpenAI Responses API request (Codex): the step's actions as
    exec_command calls (Read is `cat`, Edit and Write are apply_patch), then `say`."""
    items = [i for i in body.get("input") or [] if isinstance(i, dict)]
    messages = [i for i in items if i.get("type", "message") == "message"]
    conv = conversation(messages)
    if conv is None:
        log({"api": "responses", "kind": "side", "model": body.get("model")})
        return [{"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": "ok", "annotations": []}]}]
    step_index, _ = conv
    turn = sum(1 for i in items if i.get("type") == "function_call")
    step = step_of(step_index)
    actions = step.get("actions", [])
    log({"api": "responses", "kind": "main", "step": step_index, "turn": turn,
         "model": body.get("model"), "tools": len(body.get("tools") or [])})
    if turn >= len(actions):
        return [{"type": "message", "role": "assistant", "id": "msg_%d" % turn,
                 "content": [{"type": "output_text", "text": step.get("say", "Done."),
                              "annotations": []}]}]
    action = actions[turn]
    if action["tool"] == "Read":
        cmd = "cat %s" % action["file"]
    elif action["tool"] == "Shell":
        cmd = action["command"]
    else:
        cmd = codex_patch(action)
    return [{"type": "function_call", "id": "fc_%02d_%02d" % (step_index, turn),
             "call_id": "call_%02d_%02d" % (step_index, turn), "name": "exec_command",
             "arguments": json.dumps({"cmd": cmd})}]


def gemini_parts(body):
    """The parts of a Gemini API answer (Gemini CLI): the step's actions as read_file, replace
    and write_file calls (paths as the scenario gives them), then `say`. Side requests with a
    JSON schema (the CLI's routing and next-speaker checks) get an object of that schema."""
    contents = body.get("contents") or []
    messages = [{"role": c.get("role"), "content": " ".join(p.get("text", "") for p in
                 c.get("parts") or [])} for c in contents]
    schema = (body.get("generationConfig") or {}).get("responseJsonSchema")
    conv = None if schema else conversation(messages)
    if conv is None:
        log({"api": "gemini", "kind": "side", "schema": bool(schema)})
        text = json.dumps(schema_example(schema)) if schema else "ok"
        return [{"text": text}]
    step_index, _ = conv
    turn = sum(1 for c in contents for p in c.get("parts") or [] if "functionCall" in p)
    step = step_of(step_index)
    actions = step.get("actions", [])
    log({"api": "gemini", "kind": "main", "step": step_index, "turn": turn,
         "tools": sum(len(t.get("functionDeclarations", [])) for t in body.get("tools") or [])})
    if turn >= len(actions):
        return [{"text": step.get("say", "Done.")}]
    a = actions[turn]
    if a["tool"] == "Read":
        call = {"name": "read_file", "args": {"file_path": a["file"]}}
    elif a["tool"] == "Edit":
        call = {"name": "replace", "args": {"file_path": a["file"], "old_string": a["old"],
                                            "new_string": a["new"], "instruction": "edit"}}
    elif a["tool"] == "Shell":
        call = {"name": "run_shell_command", "args": {"command": a["command"]}}
    else:
        call = {"name": "write_file", "args": {"file_path": a["file"], "content": a["content"]}}
    return [{"functionCall": call}]


def schema_example(schema):
    """A value of a JSON schema: enums take "user" when offered (the next speaker), else the
    first value."""
    kind = str(schema.get("type", "object")).lower()
    if "enum" in schema:
        return "user" if "user" in schema["enum"] else schema["enum"][0]
    if kind == "object":
        return {k: schema_example(v) for k, v in (schema.get("properties") or {}).items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 1
    if kind == "boolean":
        return False
    return "ok"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            return json.loads(raw or b"{}")
        except ValueError:
            return {}

    def send_json(self, obj, status=200):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        log({"api": "get", "kind": "side", "path": self.path})
        self.send_json({"error": {"type": "not_found", "message": "scripted endpoint"}}, 404)

    def do_HEAD(self):
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        body = self.body()
        path = self.path.split("?")[0]
        dump_dir = os.environ.get("SCRIPTED_LLM_DUMP_DIR")
        if dump_dir:
            with LOCK:
                n = len(os.listdir(dump_dir))
                with open(os.path.join(dump_dir, "%03d.json" % n), "w") as f:
                    json.dump({"path": self.path, "headers": dict(self.headers), "body": body}, f)
        if path.endswith("/messages/count_tokens"):
            log({"api": "anthropic", "kind": "count_tokens"})
            return self.send_json({"input_tokens": USAGE_IN})
        if path.endswith("/messages"):
            return self.anthropic(body)
        if path.endswith("/chat/completions"):
            return self.openai(body)
        if path.endswith("/responses"):
            return self.responses_api(body)
        if path.endswith(":countTokens"):
            return self.send_json({"totalTokens": USAGE_IN})
        if path.endswith(":generateContent") or path.endswith(":streamGenerateContent"):
            return self.gemini(body, path.endswith(":streamGenerateContent"))
        log({"api": "post", "kind": "side", "path": path})
        self.send_json({"error": {"type": "not_found", "message": "scripted endpoint"}}, 404)

    def anthropic(self, body):
        blocks, stop = anthropic_answer(body)
        model = body.get("model", "claude-sonnet-4-5")
        msg_id = "msg_%d" % int(time.time() * 1e6)
        usage = {"input_tokens": USAGE_IN, "output_tokens": USAGE_OUT,
                 "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        if not body.get("stream"):
            return self.send_json({"id": msg_id, "type": "message", "role": "assistant",
                                   "model": model, "content": blocks, "stop_reason": stop,
                                   "stop_sequence": None, "usage": usage})
        events = [("message_start", {"type": "message_start", "message": {
            "id": msg_id, "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": dict(usage, output_tokens=1)}})]
        for i, b in enumerate(blocks):
            if b["type"] == "text":
                events.append(("content_block_start", {"type": "content_block_start", "index": i,
                               "content_block": {"type": "text", "text": ""}}))
                events.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                               "delta": {"type": "text_delta", "text": b["text"]}}))
            else:
                events.append(("content_block_start", {"type": "content_block_start", "index": i,
                               "content_block": {"type": "tool_use", "id": b["id"],
                                                 "name": b["name"], "input": {}}}))
                events.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                               "delta": {"type": "input_json_delta",
                                         "partial_json": json.dumps(b["input"])}}))
            events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
        events.append(("message_delta", {"type": "message_delta",
                       "delta": {"stop_reason": stop, "stop_sequence": None},
                       "usage": {"output_tokens": USAGE_OUT}}))
        events.append(("message_stop", {"type": "message_stop"}))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for name, data in events:
            self.wfile.write(("event: %s\ndata: %s\n\n" % (name, json.dumps(data))).encode())
            self.wfile.flush()
        self.close_connection = True

    def sse(self, events):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for name, data in events:
            head = "event: %s\n" % name if name else ""
            self.wfile.write((head + "data: %s\n\n" % json.dumps(data)).encode())
            self.wfile.flush()
        self.close_connection = True

    def responses_api(self, body):
        items = responses_answer(body)
        resp_id = "resp_%d" % int(time.time() * 1e6)
        model = body.get("model", "gpt-5-codex")
        usage = {"input_tokens": USAGE_IN, "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": USAGE_OUT, "output_tokens_details": {"reasoning_tokens": int(os.environ.get("SCRIPTED_LLM_REASONING", "0"))},
                 "total_tokens": USAGE_IN + USAGE_OUT}
        response = {"id": resp_id, "object": "response", "model": model, "status": "in_progress",
                    "output": []}
        events = [("response.created", {"type": "response.created", "response": response})]
        for i, item in enumerate(items):
            events.append(("response.output_item.added", {"type": "response.output_item.added",
                           "output_index": i, "item": item}))
            events.append(("response.output_item.done", {"type": "response.output_item.done",
                           "output_index": i, "item": item}))
        done = dict(response, status="completed", output=items, usage=usage)
        events.append(("response.completed", {"type": "response.completed", "response": done}))
        self.sse(events)

    def gemini(self, body, stream):
        parts = gemini_parts(body)
        answer = {"candidates": [{"content": {"role": "model", "parts": parts},
                                  "finishReason": "STOP", "index": 0}],
                  "usageMetadata": {"promptTokenCount": USAGE_IN,
                                    "candidatesTokenCount": USAGE_OUT,
                                    "totalTokenCount": USAGE_IN + USAGE_OUT},
                  "modelVersion": "scripted"}
        if not stream:
            return self.send_json(answer)
        self.sse([(None, answer)])

    def openai(self, body):
        call = None
        if body.get("tools"):
            call, text = openai_tool_call(body)
        else:
            text = openai_answer(body)
        model = body.get("model", "gpt-4o-mini")
        created = int(time.time())
        usage = {"prompt_tokens": USAGE_IN, "completion_tokens": USAGE_OUT,
                 "total_tokens": USAGE_IN + USAGE_OUT}
        finish = "tool_calls" if call else "stop"
        if not body.get("stream"):
            message = {"role": "assistant", "content": text}
            if call:
                message["tool_calls"] = [{k: v for k, v in call.items() if k != "index"}]
            return self.send_json({"id": "chatcmpl-1", "object": "chat.completion",
                                   "created": created, "model": model,
                                   "choices": [{"index": 0, "finish_reason": finish,
                                                "message": message}],
                                   "usage": usage})
        base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": created,
                "model": model}
        delta = {"role": "assistant", "content": text}
        if call:
            delta["tool_calls"] = [call]
        chunks = [dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": None}]),
                  dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": finish}]),
                  dict(base, choices=[], usage=usage)]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for c in chunks:
            self.wfile.write(("data: %s\n\n" % json.dumps(c)).encode())
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True


def main():
    global SCENARIO
    with open(sys.argv[1]) as f:
        SCENARIO = json.load(f)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    port_file = SCENARIO["port_file"]
    with open(port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(port_file + ".tmp", port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
