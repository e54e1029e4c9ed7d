"""Downloads of shared files never send a token where it does not belong (issue 16).

Slack's bot token goes to ``files.slack.com`` (here: the fake Slack API's origin, the
configured ``SLACK_API_URL``) and nowhere else; Discord attachments are fetched with no
token, from the CDN hosts (here: the fake's origin) only. A URL on another host, and a
redirect to one, is refused: asserted from what the other host (a second local server
on another port) received, which is nothing. Then the hub's caps: files per message,
bytes per file, the download timeout, each said where it should be.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from adapters.discord import translate as discord_translate
from adapters.discord.files import DiscordFiles
from adapters.downloads import Downloader, Origin
from adapters.slack import translate as slack_translate
from adapters.slack.files import SlackFiles
from adapters.slack.translate import attachments
from conversations.errors import FetchFailed, FileTooLarge
from conversations.events import Attachment, MessagePosted
from conversations.files import Fetched, FileLimits, caps_notice, fetch_shared
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.files import FakeFileHost, png
from tests.fakes.slack_api import FakeSlackApi
from tests.translation_cases import DISCORD_ME, SLACK_ME, discord_body, slack_body

TOKEN = "xoxb-test"


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlackApi]:
    async with FakeSlackApi() as api:
        yield api


@pytest.fixture
async def foreign() -> AsyncIterator[FakeFileHost]:
    async with FakeFileHost() as host:
        yield host


def shared_on_slack(file: dict) -> Attachment:
    """The attachment the Slack translator makes of a file object."""
    (found,) = attachments([file])
    return found


# --- what the platforms say about a file --------------------------------------------------


def test_the_translators_read_the_files_a_message_shares() -> None:
    slack_event = slack_translate.inbound_event(slack_body("message_file_share"), SLACK_ME)
    discord_event = discord_translate.message_event(
        discord_body("message_create_with_attachments"), DISCORD_ME, thread_ids=()
    )

    assert isinstance(slack_event, MessagePosted) and isinstance(discord_event, MessagePosted)
    assert [(a.name, a.media_type, a.size, a.url[:40]) for a in slack_event.attachments] == [
        ("login-failure.png", "image/png", 48213, "https://files.slack.com/files-pri/T0AGT0"),
        ("pytest.log", "text/plain", 5120, "https://files.slack.com/files-pri/T0AGT0"),
        ("F0AGT0GONE1", "application/octet-stream", None, ""),  # deleted: nothing to fetch
    ]
    assert [(a.name, a.media_type, a.url[:27]) for a in discord_event.attachments] == [
        ("login-failure.png", "image/png", "https://cdn.discordapp.com/"),
        ("pytest.log", "text/plain; charset=utf-8", "https://cdn.discordapp.com/"),
    ]


# --- who gets the token -------------------------------------------------------------------


async def test_slack_files_are_fetched_with_the_bot_token(slack: FakeSlackApi) -> None:
    image = png(2, 2)
    file = slack.share_file("screen.png", image, mimetype="image/png")

    fetched = await SlackFiles(token=TOKEN, api_url=slack.base_url).fetch(
        shared_on_slack(file), max_bytes=1024
    )

    assert fetched == image
    (download,) = slack.downloads
    assert download.path.endswith("/download/screen.png") and download.status == 200
    assert download.authorization == f"Bearer {TOKEN}"


async def test_a_file_on_another_host_is_refused_and_that_host_gets_nothing(
    slack: FakeSlackApi, foreign: FakeFileHost
) -> None:
    url = foreign.serve("/files-pri/T0AGT00001-F1/download/x.png", png(2, 2))
    file = slack.share_file("x.png", b"", mimetype="image/png", url=url)

    with pytest.raises(FetchFailed, match="not on a host threadbot takes Slack files from"):
        await SlackFiles(token=TOKEN, api_url=slack.base_url).fetch(
            shared_on_slack(file), max_bytes=1024
        )
    assert foreign.requests == []
    assert slack.downloads == []


async def test_a_redirect_to_another_host_is_not_followed(
    slack: FakeSlackApi, foreign: FakeFileHost
) -> None:
    elsewhere = foreign.serve("/landing", b"<html>sign in</html>", "text/html")
    file = slack.share_file("x.png", png(2, 2), mimetype="image/png", redirect_to=elsewhere)

    with pytest.raises(FetchFailed, match=r"it is on http://127\.0\.0\.1"):
        await SlackFiles(token=TOKEN, api_url=slack.base_url).fetch(
            shared_on_slack(file), max_bytes=1024
        )
    assert foreign.requests == []  # neither the token nor anything else went there
    assert [(d.status, d.authorization) for d in slack.downloads] == [(302, f"Bearer {TOKEN}")]


async def test_a_redirect_on_slacks_own_host_keeps_the_token(slack: FakeSlackApi) -> None:
    image = png(2, 2)
    target = slack.share_file("moved.png", image, mimetype="image/png")
    file = slack.share_file("x.png", b"", redirect_to=target["url_private_download"])

    fetched = await SlackFiles(token=TOKEN, api_url=slack.base_url).fetch(
        shared_on_slack(file), max_bytes=1024
    )

    assert fetched == image
    assert [(d.status, d.authorization) for d in slack.downloads] == [
        (302, f"Bearer {TOKEN}"),
        (200, f"Bearer {TOKEN}"),
    ]


async def test_a_wrong_token_or_a_login_page_is_a_failure_not_a_file(slack: FakeSlackApi) -> None:
    file = slack.share_file("x.png", png(2, 2), mimetype="image/png")
    page = slack.share_file("y.png", b"<html>sign in</html>", mimetype="text/html")
    claimed = shared_on_slack(page).model_copy(update={"media_type": "image/png"})

    with pytest.raises(FetchFailed, match="answered HTTP 403"):
        await SlackFiles(token="xoxb-other", api_url=slack.base_url).fetch(
            shared_on_slack(file), max_bytes=1024
        )
    with pytest.raises(FetchFailed, match="files:read scope"):
        await SlackFiles(token=TOKEN, api_url=slack.base_url).fetch(claimed, max_bytes=1024)


async def test_discord_attachments_are_fetched_with_no_token_from_the_cdn_only(
    foreign: FakeFileHost,
) -> None:
    async with FakeDiscord(token="fake-token") as fake:
        image = png(2, 2)
        attached = fake.attach("screen.png", image, content_type="image/png")
        elsewhere = fake.attach("x.png", b"", url=foreign.serve("/attachments/1/2/x.png", image))
        files = DiscordFiles(api_url=fake.api_url)

        fetched = await files.fetch(_discord(attached), max_bytes=1024)
        with pytest.raises(FetchFailed, match="not on a host threadbot takes Discord files from"):
            await files.fetch(_discord(elsewhere), max_bytes=1024)

        assert fetched == image
        (download,) = fake.downloads
        assert download.authorization is None and "Bot" not in str(dict(download.headers))
        assert foreign.requests == []


def _discord(attachment: dict) -> Attachment:
    return Attachment(
        id=attachment["id"],
        name=attachment["filename"],
        url=attachment["url"],
        size=attachment["size"],
    )


def test_only_the_platforms_file_hosts_are_trusted() -> None:
    slack = SlackFiles(token=TOKEN)
    discord = DiscordFiles()

    assert slack.allows("https://files.slack.com/files-pri/T1-F1/download/a.png")
    assert slack.allows("https://FILES.slack.com:443/files-pri/T1-F1/a.png")
    for url in (
        "http://files.slack.com/files-pri/T1-F1/a.png",  # not https
        "https://files.slack.com:8443/a.png",
        "https://files.slack.com.example.com/a.png",
        "https://example.com/files.slack.com/a.png",
        "https://slack.com/files-pri/T1-F1/a.png",
        "/files-pri/T1-F1/a.png",
        "",
    ):
        assert not slack.allows(url), url
    assert discord.allows("https://cdn.discordapp.com/attachments/1/2/a.png?ex=1&is=2&hm=3&")
    assert discord.allows("https://media.discordapp.net/attachments/1/2/a.png")
    assert not discord.allows("https://discord.com/api/v10/attachments/1/2/a.png")
    assert not discord.allows("https://cdn.discordapp.com.example.com/a.png")
    assert Origin.of("https://files.slack.com/x") == Origin("https", "files.slack.com", 443)


# --- sizes ----------------------------------------------------------------------------------


async def test_a_download_stops_past_the_cap_whether_or_not_its_length_is_told(
    foreign: FakeFileHost,
) -> None:
    async def endless(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        for _ in range(64):
            await response.write(b"x" * 1024)
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_get("/big", endless)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    try:
        streamed = Downloader(platform="Test", origins=[Origin("http", host, port)])
        told = Downloader(platform="Test", origins=[Origin.of(foreign.root_url)])  # type: ignore[list-item]
        url = foreign.serve("/told", b"y" * 4096, "application/octet-stream")

        with pytest.raises(FileTooLarge):
            await streamed.get(f"http://{host}:{port}/big", max_bytes=10_000)
        with pytest.raises(FileTooLarge):
            await told.get(url, max_bytes=1000)
        assert (await told.get(url, max_bytes=4096)).data == b"y" * 4096
    finally:
        await runner.cleanup()


# --- the hub's caps -------------------------------------------------------------------------


class Fetcher:
    """A fetcher whose files are bytes by URL; ``slow`` URLs never answer."""

    platform = "test"

    def __init__(self, files: dict[str, bytes], *, slow: frozenset[str] = frozenset()) -> None:
        self.files = files
        self.slow = slow
        self.fetched: list[str] = []

    async def fetch(self, attachment: Attachment, *, max_bytes: int) -> bytes:
        self.fetched.append(attachment.url)
        if attachment.url in self.slow:
            await asyncio.Event().wait()
        if attachment.url == "u/bug":
            raise RuntimeError("a fetcher's bug")
        data = self.files.get(attachment.url)
        if data is None:
            raise FetchFailed("HTTP 404")
        if len(data) > max_bytes:
            raise FileTooLarge("too big", limit=max_bytes)
        return data


def ref(name: str, *, size: int | None = None, url: str | None = None) -> Attachment:
    return Attachment(id=name, name=name, url=f"u/{name}" if url is None else url, size=size)


async def test_the_caps_leave_files_out_and_the_notice_names_them() -> None:
    fetcher = Fetcher({"u/a.txt": b"a", "u/b.bin": b"b" * 200, "u/c.txt": b"c"})
    limits = FileLimits(max_bytes=100, per_message=3, timeout=5)
    refs = [
        ref("a.txt"),
        ref("big.iso", size=10_000),  # said too large by the platform: never fetched
        ref("b.bin"),  # too large once read
        ref("c.txt"),
    ]

    fetched = await fetch_shared(refs, fetcher, limits)

    assert [(f.name, f.data, f.problem) for f in fetched.files] == [
        ("a.txt", b"a", None),
        ("big.iso", None, "not fetched: larger than the 100 bytes limit a file"),
        ("b.bin", None, "not fetched: larger than the 100 bytes limit a file"),
        ("c.txt", None, "not fetched: only the first 3 files of a message are read"),
    ]
    assert fetcher.fetched == ["u/a.txt", "u/b.bin"]
    assert caps_notice(fetched, limits) == (
        "📎 I can't take `big.iso` (9.8 KB), `b.bin` (unknown size): the limit is 100 bytes "
        "a file.\n📎 I take the first 3 files of a message; I left out `c.txt`."
    )


async def test_a_failed_or_slow_download_is_told_to_the_model_and_loses_nothing_else() -> None:
    fetcher = Fetcher({"u/ok.txt": b"fine", "u/slow.txt": b"late"}, slow=frozenset({"u/slow.txt"}))
    limits = FileLimits(timeout=0.05)

    fetched = await fetch_shared(
        [ref("gone.png"), ref("slow.txt"), ref("ok.txt"), ref("tomb", url=""), ref("bug")],
        fetcher,
        limits,
    )

    assert [(f.name, f.data, f.problem) for f in fetched.files] == [
        ("gone.png", None, "couldn't fetch it: HTTP 404"),
        ("slow.txt", None, "couldn't fetch it in 0.05 s"),
        ("ok.txt", b"fine", None),
        ("tomb", None, "not fetched: the platform gave no way to fetch it"),
        ("bug", None, "couldn't fetch it: an unexpected error"),
    ]
    assert caps_notice(fetched, limits) is None  # no cap was hit: nothing to say in the thread


def test_a_file_name_in_the_notice_cannot_ping_the_channel_or_end_its_code_span() -> None:
    fetched = Fetched(
        files=(), too_large=(("<!channel> dump.zip", 5_000),), too_many=("<!here>` x.txt",)
    )
    notice = caps_notice(fetched, FileLimits(max_bytes=1_000, per_message=1))
    assert notice == (
        "📎 I can't take `?!channel? dump.zip` (4.9 KB): the limit is 1000 bytes a file.\n"
        "📎 I take the first 1 files of a message; I left out `?!here?? x.txt`."
    )
