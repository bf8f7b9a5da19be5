"""The in-process EVM (eth-tester + py-evm, the committed contracts) behind a JSON-RPC HTTP
endpoint, as a node is: ``svc-ops`` and the servers reach it through
``SVCSRV_CHAIN_RPC_URL`` with the very code that reaches Base, and no Hardhat is started.

Requests go through web3's eth-tester middleware (JSON-RPC's hex in, Python values to the
tester), and answers are written back as a node writes them: quantities and bytes in hex,
a revert as error 3 with its data (what geth and Hardhat send, and what web3 decodes).
One request at a time (``HTTPServer``): eth-tester is not thread-safe, and a test does not
use the chain directly while a request of its own is in flight.
"""

from __future__ import annotations

import ast
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

from web3.datastructures import NamedElementOnion

from payments.chain.in_process import InProcessChain
from payments.chain.params import ChainParams

_REVERT_DATA = re.compile(r"execution reverted(?:: (b(['\"]).*\2))?\Z", re.DOTALL)


@dataclass(frozen=True)
class EvmNode:
    url: str
    chain: InProcessChain  # the same EVM, for the test's own reads and setup

    @property
    def params(self) -> ChainParams:
        return self.chain.params

    def server_settings(self, **overrides: Any) -> dict[str, Any]:
        """``Settings`` fields of a server on this node, with no relayer key."""
        params = self.params
        return {"chain_backend": "json_rpc", "chain_rpc_url": self.url,
                "chain_id": params.chain_id, "spender_address": params.spender,
                "usdc_address": params.token, "usdc_name": params.token_name,
                "usdc_version": params.token_version, "chain_confirmations": 1, **overrides}


def as_json(value: Any) -> Any:
    """A tester result as JSON-RPC writes it."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return hex(value)
    if isinstance(value, bytes | bytearray):
        return "0x" + bytes(value).hex()
    if isinstance(value, list | tuple):
        return [as_json(item) for item in value]
    return {key: as_json(item) for key, item in dict(value).items()}


def error_of(exc: Exception) -> dict[str, Any]:
    message = str(exc)
    revert = _REVERT_DATA.match(message)
    if revert is None:
        return {"code": -32000, "message": message}
    data = ast.literal_eval(revert.group(1)) if revert.group(1) else b""
    return {"code": 3, "message": "execution reverted", "data": "0x" + data.hex()}


@contextmanager
def evm_node() -> Iterator[EvmNode]:
    chain = InProcessChain.start()
    call = chain.w3.provider.request_func(chain.w3, NamedElementOnion([]))

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            answer: dict[str, Any] = {"jsonrpc": "2.0", "id": request.get("id")}
            try:
                response = call(request["method"], request.get("params", []))
            except Exception as exc:  # the tester's refusal, as a node's error
                answer["error"] = error_of(exc)
            else:
                if "error" in response:
                    answer["error"] = dict(response["error"])
                else:
                    answer["result"] = as_json(response.get("result"))
            body = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, name="evm-node", daemon=True)
    thread.start()
    try:
        yield EvmNode(f"http://127.0.0.1:{server.server_port}", chain)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
