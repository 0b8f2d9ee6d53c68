"""A minimal OpenAI-compatible /v1/chat/completions on loopback, for the recipe tests (docs/connect.md).

It answers "Noted." to every prompt, except a request with the header `x-test-leak: previous` (or the next
request after `leak_next = True`): that one gets the previous request's prompt as its answer (the stale-KV
failure as a client sees it: HTTP 200, someone else's text).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

ANSWER = "Noted. I will keep that in mind for the next step."


class ChatServer:
    def __init__(self) -> None:
        self.prompts: list[str] = []
        self.leak_next = False
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: Any = None

    async def _chat(self, request: Any) -> Any:
        from aiohttp import web

        body = await request.json()
        prompt = "\n".join(m["content"] for m in body["messages"] if isinstance(m.get("content"), str))
        content = self.answer(body, prompt, request.headers)
        self.prompts.append(prompt)
        n_in, n_out = len(prompt.split()), len(content.split())
        return web.json_response(
            {
                "id": f"chatcmpl-{len(self.prompts)}",
                "object": "chat.completion",
                "created": 1_787_817_600,
                "model": body["model"],
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out},
            }
        )

    def answer(self, body: dict[str, Any], prompt: str, headers: Any) -> str:
        """The answer's text (a subclass decides otherwise); called before `prompt` joins `prompts`."""
        leak = (self.leak_next or headers.get("x-test-leak") == "previous") and self.prompts
        self.leak_next = False
        return self.prompts[-1] if leak else ANSWER

    def start(self) -> int:
        from aiohttp import web

        ready = threading.Event()

        async def boot() -> None:
            app = web.Application()
            app.router.add_post("/v1/chat/completions", self._chat)
            self._runner = web.AppRunner(app, access_log=None)
            await self._runner.setup()
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            await site.start()
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

        def main() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(boot())
            ready.set()
            self._loop.run_forever()

        threading.Thread(target=main, daemon=True).start()
        if not ready.wait(10):
            raise RuntimeError("chat server did not start")
        return self.port

    def stop(self) -> None:
        if self._loop is None:
            return
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)


class LeakyServer(ChatServer):
    """Answers globex with acme's last prompt once `leak` is set (the stale-KV failure as a client sees it)."""

    def __init__(self) -> None:
        super().__init__()
        self.last: dict[str, str] = {}
        self.leak = False

    def answer(self, body: dict[str, Any], prompt: str, headers: Any) -> str:
        who = body.get("user", "?")
        content = self.last["acme"] if self.leak and who == "globex" else "Noted."
        self.last[who] = prompt
        return content
