"""One OpenAI-compatible vLLM server of a role: requests sent concurrently (asyncio, httpx), connection errors
retried with a bounded budget, and every failure a `ServerError` naming the role, the URL and what answered.

Before its first request the server is asked which models it serves (`GET /v1/models`): a server of another
model is refused, so a helper server is never read as the PRM or a run's responses as another model's. A server
that stops answering mid-run ends the run once the retries are spent; the run journal keeps every finished
problem, and a rerun against a restarted server resumes from it (docs/http.md).
"""

import asyncio
import time

RETRIED = ("ConnectError", "ConnectTimeout", "ReadError", "RemoteProtocolError", "WriteError")


class ServerError(RuntimeError):
    """A server of a role is missing, serves another model, or answered something unusable."""


class Server:
    def __init__(self, role: str, url: str, model: str, *, retries: int = 3, backoff: float = 1.0,
                 timeout: float = 600.0):
        self.role, self.url, self.model = role, url.rstrip("/"), model
        self.retries, self.backoff, self.timeout = retries, backoff, timeout
        self.requests = self.retried = 0
        self.checked = False

    def describe(self) -> dict:
        return {"url": self.url, "served_model": self.model, "requests": self.requests, "retried": self.retried}

    def check(self) -> None:
        """Refuse a server that does not serve `model` (the names it serves in the message)."""
        if self.checked:
            return
        answer = self.run([("GET", "/v1/models", None)])[0]
        try:
            served = [entry["id"] for entry in answer["data"]]
        except (KeyError, TypeError) as error:
            raise ServerError(f"{self.role} server {self.url}/v1/models answered no model list: {answer!r:.300}") \
                from error
        if self.model not in served:
            raise ServerError(f"{self.role} server {self.url} serves {', '.join(served) or 'no model'}, not "
                              f"{self.model}: start the right one (kvrescue-eval serve {self.role} ...) or point "
                              f"{self.role}_url at it")
        self.checked = True

    def run(self, calls) -> list:
        """The JSON answers of (method, path, body) calls, sent at once; a ServerError when any fails."""
        return asyncio.run(self._all(list(calls)))

    async def _all(self, calls) -> list:
        import httpx

        async with httpx.AsyncClient(timeout=self.timeout) as client:
            return await asyncio.gather(*(self._one(client, *call) for call in calls))

    async def _one(self, client, method: str, path: str, body):
        for attempt in range(self.retries + 1):
            try:
                response = await client.request(method, self.url + path, json=body)
                break
            except Exception as error:  # noqa: BLE001 - only httpx's connection errors are retried
                if type(error).__name__ not in RETRIED:
                    raise ServerError(f"{self.role} server {self.url}{path}: {type(error).__name__}: {error}") \
                        from error
                if attempt == self.retries:
                    raise ServerError(f"{self.role} server {self.url} does not answer ({type(error).__name__}: "
                                      f"{error}) after {self.retries + 1} tries; is it running? The run journal "
                                      f"keeps the finished problems: restart the server and rerun") from error
                self.retried += 1
                await asyncio.sleep(self.backoff * 2 ** attempt)
        self.requests += 1
        if response.status_code != 200:
            raise ServerError(f"{self.role} server {self.url}{path} answered HTTP {response.status_code}: "
                              f"{response.text[:300]}")
        try:
            return response.json()
        except ValueError as error:
            raise ServerError(f"{self.role} server {self.url}{path} answered no JSON: {response.text[:300]!r}") \
                from error


def field_of(server: Server, answer, *path):
    """answer[path...], or a ServerError naming the server and the malformed answer."""
    value = answer
    try:
        for part in path:
            value = value[part]
    except (KeyError, IndexError, TypeError) as error:
        raise ServerError(f"{server.role} server {server.url} answered malformed data (no "
                          f"{'.'.join(map(str, path))}): {answer!r:.300}") from error
    return value


def wait_until_serving(server: Server, seconds: float) -> None:
    """Poll until the server answers (used by `kvrescue-eval serve --wait` and the tests)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            server.run([("GET", "/v1/models", None)])
            return
        except ServerError:
            if time.monotonic() > deadline:
                raise
            time.sleep(2)
