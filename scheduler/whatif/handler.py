"""``POST /debug/whatif``: the body (JSON ``WhatIfRequest``) in, (HTTP status, JSON payload) out.
A request error answers its own status with the field that is wrong; nothing else escapes."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from scheduler.whatif.answer import WhatIfAnswer
from scheduler.whatif.request import RequestError, WhatIfRequest, parse_request

__all__ = ["WhatIfProvider", "handle_what_if"]

log = logging.getLogger(__name__)

WhatIfProvider = Callable[[WhatIfRequest], Awaitable[WhatIfAnswer]]


async def handle_what_if(provider: WhatIfProvider, body: bytes) -> tuple[int, dict[str, Any]]:
    try:
        request = parse_request(body)
        answer = await provider(request)
    except RequestError as exc:
        return exc.status, {"error": str(exc), "field": exc.field}
    except Exception as exc:
        log.exception("what-if failed")
        return 500, {"error": f"{type(exc).__name__}: {exc}"}
    return 200, answer.model_dump(mode="json")
