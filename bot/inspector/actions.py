"""An operator's actions from a conversation's page: fork at an entry, stop the run.

- ``POST /inspector/conversations/{id}/fork`` with the form field ``at`` (a journal
  ``seq``): the fork ``threadbot fork`` makes (:func:`bot.forking.forker_for`,
  :meth:`conversations.forks.Forker.fork`), as the signed-in operator with the means
  ``inspector``: its audit row is written in the fork's own transaction. 303 to the new
  conversation's page; 400 for an ``at`` that is no point to fork at (no entry of the
  journal, no number, before the first request, where the run had ended: recorded as a
  refused fork), 404 for an unknown conversation, each saying why.
- ``POST /inspector/conversations/{id}/stop``: the hub's stop
  (:meth:`conversations.stopping.Stopper.stop`), as ``operator <name>`` (id
  ``operator:<name>``) by the means ``inspector``, so it reaches the run wherever it
  runs (here, or a stop request to the instance that holds it) and is recorded as any
  stop (its commit). 303 back to the page; 404 for an unknown conversation; 409 for a
  conversation that had ended (nothing runs or waits: recorded as a refused stop, and
  nothing is said in its thread) and for a fork whose thread is not started yet; 503
  where no hub runs beside the inspector.
- ``GET`` of either (an address typed, or the way back after a sign-in): 303 to the
  conversation's page, where the forms are.

The guard has checked the session and the CSRF token before (:mod:`bot.inspector.guard`).
See docs/architecture.md, "Rewind and fork".
"""

from __future__ import annotations

from aiohttp import web

from bot.forking import forker_for
from bot.inspector.web import INSPECTOR, PREFIX, Inspector, operator_of, see_other
from conversations.forks import ForkRefused
from conversations.stopping import Stopper
from conversations.store.schedules import awaits_thread
from core.vocabulary.audit import STOP
from core.vocabulary.lifecycle import ENDED
from core.vocabulary.people import Person

routes = web.RouteTableDef()

STOPPER = web.AppKey("inspector_stopper", Stopper)
"""The hub's stopper, on the application where the bot runs beside the inspector
(:func:`bot.inspector.routes.install`)."""


def _refused(
    request: web.Request, inspector: Inspector, cid: str, status: int, title: str, why: str
) -> web.Response:
    """The page that says why an action was not taken, with ``status``."""
    return inspector.render(
        request, "action_refused.html", status=status, title=title, why=why, cid=cid
    )


@routes.post(PREFIX + "/conversations/{id}/fork")
async def fork(request: web.Request) -> web.Response:
    """Fork the conversation at the form's ``at`` (see the module docstring)."""
    inspector = request.app[INSPECTOR]
    cid = request.match_info["id"]
    form = await request.post()
    if await inspector.store.threads.find(cid) is None:
        return inspector.render(
            request, "not_found.html", status=404, what=f"There is no conversation {cid}."
        )
    forker = forker_for(inspector.settings, inspector.store)
    name = operator_of(request)
    try:
        at = int(str(form.get("at", "")).strip())
    except ValueError:
        why = f"{str(form.get('at', ''))[:40]!r} is not a journal entry's number"
        await forker.refuse(cid, None, operator=name, means="inspector", why=why)
        return _refused(request, inspector, cid, 400, "Not forked", f"{why}.")
    try:
        made = await forker.fork(cid, at, operator=name, means="inspector")
    except ForkRefused as exc:
        return _refused(request, inspector, cid, 400, "Not forked", f"{exc}.")
    return see_other(f"{PREFIX}/conversations/{made.conversation_id}")


@routes.get(PREFIX + "/conversations/{id}/fork")
@routes.get(PREFIX + "/conversations/{id}/stop")
async def to_the_page(request: web.Request) -> web.Response:
    """An action's address asked by ``GET``: 303 to the conversation's page."""
    return see_other(f"{PREFIX}/conversations/{request.match_info['id']}")


@routes.post(PREFIX + "/conversations/{id}/stop")
async def stop(request: web.Request) -> web.Response:
    """Stop the conversation's run wherever it runs (see the module docstring)."""
    inspector = request.app[INSPECTOR]
    cid = request.match_info["id"]
    conversation = await inspector.store.threads.find(cid)
    if conversation is None:
        return inspector.render(
            request, "not_found.html", status=404, what=f"There is no conversation {cid}."
        )
    name = operator_of(request)
    status = conversation.status
    if status.lifecycle in ENDED:  # nothing runs or waits: the thread is told nothing
        await inspector.audit(
            request,
            action=STOP,
            outcome="refused",
            reason=f"nothing to stop: it had ended ({status})",
            conversation_id=cid,
            where=conversation.binding,
        )
        why = f"Nothing to stop: it had ended ({status})."
        return _refused(request, inspector, cid, 409, "Not stopped", why)
    if awaits_thread(conversation.binding):
        why = "Its thread has not started yet: stop it once it has."
        return _refused(request, inspector, cid, 409, "Not stopped", why)
    stopper = request.app.get(STOPPER)
    if stopper is None:
        why = "No bot runs beside this inspector: stop it from the thread, or another instance."
        return _refused(request, inspector, cid, 503, "Not stopped", why)
    by = Person(id=f"operator:{name}", name=f"operator {name}")
    await stopper.stop(conversation, by, means="inspector")
    return see_other(f"{PREFIX}/conversations/{cid}")
