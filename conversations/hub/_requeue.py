"""Messages recorded but not journaled yet, queued again as when they came in.

A message is kept in the inbox with its conversation from its delivery until its
effect is journaled (:mod:`conversations.hub._dedupe`). A crash or a lapsed lease in
between leaves it there; the next start, a takeover or a wake-up's poll hands it back
here: the mention that opened a conversation starts its run, a reply goes through the
chain again past bind and dedupe (it was recorded), answered by the busy mode its
acknowledgement told, if it had one.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from conversations.events import MessagePosted, inbound_adapter
from conversations.hub import _chain
from conversations.hub._chain import Answer, Inbound, Step
from conversations.hub._runs import Runs
from conversations.store import ConversationInfo, Inbox, Threads
from conversations.store.schedules import awaits_thread


class Requeue:
    """Queues the recorded, unjournaled messages of the store's ``inbox`` again.

    ``steps``: the chain's steps from authorise on (called at each message: the
    chain is assembled after this object); ``runs``: where a mention's run starts.
    """

    def __init__(
        self,
        *,
        inbox: Inbox,
        threads: Threads,
        runs: Runs,
        steps: Callable[[], Sequence[Step]],
    ) -> None:
        self._inbox = inbox
        self._threads = threads
        self._runs = runs
        self._steps = steps

    async def unhandled(self, only: Collection[str] | None = None) -> int:
        """Queue again the messages a crash left unjournaled (of the conversations
        ``only`` names, or all); returns how many."""
        unhandled = await self._inbox.unhandled()
        if only is not None:
            unhandled = [u for u in unhandled if u[1] in only]
        for _key, conversation_id, data in unhandled:
            await self.message(conversation_id, data)
        return len(unhandled)

    async def message(
        self, conversation_id: str, data: dict[str, object], *, mentions: bool = True
    ) -> None:
        """Queue a recorded message not journaled yet (its event as stored) as when it
        came in: the mention that opened the conversation starts it (unless not
        ``mentions``: a wake-up's poll routes replies only, a mention's start journals
        it), a reply is authorised and routed."""
        event = inbound_adapter.validate_python(data)
        if not isinstance(event, MessagePosted):
            return
        opening = event.ref.thread is None
        if opening and not mentions:
            return
        conversation = await self._threads.find(conversation_id)
        if conversation is None or (opening and awaits_thread(conversation.binding)):
            return  # a scheduled run starts once its thread is (thread_started)
        if opening:
            self._runs.start(conversation_id, event)
        else:
            await self._reply(conversation, event)

    async def _reply(self, conversation: ConversationInfo, event: MessagePosted) -> None:
        """A reply journaled by no run yet: authorised and routed as when it came in, by
        the busy mode its acknowledgement told, if it had one (kept in the inbox), else
        as the conversation's settings say now."""
        told = await self._inbox.busy_mode(event.delivery_key)
        answer = Answer(conversation, event, resumed=True, busy_mode=told)
        await _chain.run(self._steps(), Inbound(event, answer, conversation))
