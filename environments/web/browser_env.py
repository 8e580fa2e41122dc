"""The CDWM web environment: Playwright driving Debian's Chromium over the web world.

Headless, loopback only (every request to another host is aborted, except the hosts of a real
WebArena deployment named by $SHOPPING, $REDDIT, ...), background networking off. Every
browser call has a timeout, and a watchdog kills the browser if a step still hangs. `close()`
stops the browser, the Playwright driver and the server (whole process trees), also after an
error or Ctrl-C; use the environment as a context manager.

`played` and `twin()` make a **replay twin** (environments/cdwm/planner_worlds.py): a second
environment with its own server, database and browser context, reset to this one's task and rule
perturbation, on which the planner check replays this episode's actions and then asks "what would
this action change" without touching this episode. The world is deterministic given the task and
the actions (a fresh database from the seed template, cookies cleared at reset, pages without
scripts), so the twin's ledger delta is this one's (tests/environments/web/test_web_twin.py).
Element ids are Chromium's and differ between the two browsers: replay through
`explore.StableWeb`, whose page-order ids are the same in both.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict
from urllib.parse import urlparse

import psutil

from environments.cdwm.deltas import merge
from environments.web import tasks as taskmod
from environments.web.accessibility import render
from environments.web.actions import ACTION_CLASSES, ACTION_HELP, Action, ActionError, action_class, parse_action
from environments.web.evaluator import Judge, evaluate
from environments.web.ledger import LedgerEntry
from environments.web.world import WorldServer
from harness.environment import ACTION_HELP as HELP_KEY, Delta, EnvironmentClosed, Observation, StepResult
from harness.processes import kill_trees

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, CDPSession, Locator, Page, Playwright

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--no-first-run",
                 "--disable-default-apps", "--disable-sync", "--disable-dev-shm-usage"]
LOOPBACK = {"127.0.0.1", "localhost"}
# The one command that gives this machine kind the browser (`make install` runs it where it may).
INSTALL_CHROMIUM = "sudo apt-get install -y chromium"
TAG_JS = """function(tag) {
  const el = this.nodeType === 1 ? this : this.parentElement;
  if (!el) return null;
  el.setAttribute('data-cdwm-target', tag);
  return {tag: el.tagName.toLowerCase(), type: (el.type || '').toLowerCase(), disabled: !!el.disabled};
}"""


class ElementMeta(TypedDict):
    """What TAG_JS reports about the element it tagged."""

    tag: str
    type: str
    disabled: bool


def browser_missing(chromium: Path | None = None) -> str | None:
    """Why the web environment cannot start a browser here, with the command that fixes it; None
    when it can. `chromium` defaults to CHROMIUM, read at call time."""
    path = chromium or CHROMIUM
    if not (path.is_file() and os.access(path, os.X_OK)):
        return (f"the web environment drives Debian's Chromium at {path}, which is not installed here: "
                f"run `{INSTALL_CHROMIUM}` (or `make install`, which runs it where it may)")
    if importlib.util.find_spec("playwright") is None:
        return "the web environment drives Chromium through Playwright, which is not installed: run `make install`"
    return None


class WebEnvironment:
    """One browser and one server, reused across tasks; `reset(task)` resets the database."""

    def __init__(self, *, judge: Judge | None = None, timeout_s: float = 10.0, step_timeout_s: float = 60.0,
                 max_steps: int = 30, screenshot: bool = False, world: bool = True,
                 chromium: Path | None = None, viewport: tuple[int, int] = (1280, 900)):
        self.judge, self.timeout_ms, self.step_timeout_s = judge, timeout_s * 1000, step_timeout_s
        self.max_steps, self.screenshot, self.viewport = max_steps, screenshot, viewport
        self.chromium = chromium or CHROMIUM  # read at call time: one setting for the suite's check and this
        self.world = WorldServer() if world else None
        self.rule: str | None = None  # a rule perturbation the next reset switches on (rules.py)
        self._pw: Playwright | None = None
        self._browser: Browser | None = None
        self._context: BrowserContext | None = None
        self._page: Page | None = None
        self._cdp: dict[int, CDPSession] = {}
        self._browser_procs: list[psutil.Process] = []
        self._profile: str | None = None
        self._hosts = set(LOOPBACK)
        self._closed = False
        self._task: dict[str, Any] | None = None
        self._ids: dict[int, str] = {}
        self._tag = 0
        self._played: list[str] = []  # every action since reset, as given (`played`, `twin`)
        self._given: tuple[dict[str, Any], str | None] | None = None  # (task as given, rule) of the episode
        self._twin: WebEnvironment | None = None  # the one twin, kept between `twin()` calls
        self._host: WebEnvironment | None = None  # a twin's live environment, whose browser it shares
        self._thread = threading.get_ident()  # the thread that started (or will start) the browser
        atexit.register(self.close)

    # -- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> WebEnvironment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        if self._closed:
            raise EnvironmentClosed("this WebEnvironment was closed; create a new one")
        if self._context is not None:
            return
        problem = browser_missing(self.chromium)
        if problem:
            raise RuntimeError(problem)
        from playwright.sync_api import sync_playwright

        self._thread = threading.get_ident()
        try:
            if self.world is not None:
                self.world.start()
            # (A URL without a host, which _blocked_urls could not sort, adds nothing.)
            self._hosts = LOOPBACK | {h for u in taskmod.webarena_urls().values() if (h := urlparse(u).hostname)}
            if self._host is not None:  # a twin: a context of its own in its live environment's browser
                browser = self._host._browser
                if browser is None:
                    raise EnvironmentClosed("the twin's live environment has no browser running")
                # Its watchdog kills the shared browser (there is nothing else to kill of a hung context).
                self._browser_procs, self._profile = self._host._browser_procs, self._host._profile
            else:
                before = _descendants()
                pw = self._pw = sync_playwright().start()
                browser = self._browser = pw.chromium.launch(executable_path=str(self.chromium), headless=True,
                                                             args=CHROMIUM_ARGS, timeout=self.timeout_ms * 3)
                self._browser_procs = [p for pid, p in _descendants().items() if pid not in before]
                self._profile = _profile_dir(self._browser_procs)
            context = self._context = browser.new_context(viewport={"width": self.viewport[0], "height": self.viewport[1]})
            context.set_default_timeout(self.timeout_ms)
            context.set_default_navigation_timeout(self.timeout_ms)
            # Only requests to other hosts are intercepted (the regex is matched inside the driver), so
            # loopback traffic pays nothing for the block.
            context.route(_blocked_urls(self._hosts), lambda route: route.abort("blockedbyclient"))
            self._page = context.new_page()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Idempotent; never raises. Anything left of the browser's process tree is killed."""
        if self._closed:
            return
        self._closed = True
        steps: list[Callable[[], None]] = [x.close for x in (self._context, self._browser) if x is not None]
        if self._pw is not None:
            steps.append(self._pw.stop)
        if threading.get_ident() != self._thread:
            # Playwright's sync API answers only the thread that started it (a call from another one
            # can leave that thread looking as if it ran an event loop): kill, do not ask.
            steps = []
        if self._twin is not None:  # first: its context lives in this browser
            self._twin.close()
            self._twin = None
        for step in steps:
            try:
                step()
            except BaseException:  # a dead browser cannot be closed politely; it is killed below
                pass
        if self._host is None:  # a twin's browser is its live environment's, which kills it
            _kill(self._browser_procs, self._profile)
        if self.world is not None:
            self.world.stop()
        self._pw = self._browser = self._context = self._page = None
        atexit.unregister(self.close)

    @property
    def _live_context(self) -> BrowserContext:
        if self._context is None:
            raise EnvironmentClosed("the browser is not running; call reset(task) on an open WebEnvironment")
        return self._context

    @property
    def _live_page(self) -> Page:
        if self._page is None:
            raise EnvironmentClosed("the browser is not running; call reset(task) on an open WebEnvironment")
        return self._page

    @property
    def site_urls(self) -> dict[str, str]:
        urls = taskmod.webarena_urls()
        if self.world is not None and self.world.base_url:
            urls |= self.world.site_urls
        return urls

    def _allowed_hosts(self) -> set[str]:
        return self._hosts

    # -- episode -----------------------------------------------------------------------------
    def reset(self, task: dict[str, Any]) -> Observation:
        self.start()
        taskmod.validate(task, "reset(task)")
        with self._watchdog("reset"):
            if self.world is not None and taskmod.uses_world(task):
                self.world.reset(self.rule)
            self._task = taskmod.substitute(task, self.site_urls)
            context = self._live_context
            for extra in context.pages[1:]:
                extra.close()
            if taskmod.uses_world(task):
                # A pending flash message or session of the previous episode must not show in this one:
                # every episode of a task starts from the same state (what a replay twin relies on).
                context.clear_cookies()
            page = self._page = context.pages[0] if context.pages else context.new_page()
            urls = [u.strip() for u in self._task["start_url"].split(" |AND| ")]
            for i, url in enumerate(urls):  # WebArena: several start URLs open several tabs
                if i:
                    page = self._page = context.new_page()
                page.goto(url, wait_until="load")
        self._seen = self.world.last_ledger_id() if self.world is not None and self.world.base_url else 0
        self._entries: list[LedgerEntry] = []
        self._answer: str | None = None
        self._steps, self._done = 0, False
        self._played, self._given = [], (task, self.rule)
        return self._observe()

    def step(self, action: str) -> StepResult:
        if self._task is None:
            raise RuntimeError("call reset(task) before step(action)")
        self._played.append(action)
        if self._done:
            return self._result(Delta(), valid=False, error="the episode is over; call reset(task) for a new one")
        self._steps += 1
        try:
            parsed = parse_action(action)
            with self._watchdog(action_class(action)):
                self._execute(parsed)
            error = None
        except ActionError as e:
            error = str(e)
        except EnvironmentClosed:
            raise
        except Exception as e:  # a browser-side failure of a valid action: the agent sees it
            error = f"{action_class(action)} failed: {str(e).splitlines()[0][:200]}"
        entries = self.world.ledger_since(self._seen) if self.world is not None and self.world.base_url else []
        if entries:
            self._seen = entries[-1].id
            self._entries += entries
        if self._answer is not None or self._steps >= self.max_steps:
            self._done = True
        return self._result(merge([e.delta for e in entries]) if entries else Delta(), valid=error is None,
                            error=error, ledger=entries)

    def action_class(self, action: str) -> str:
        return action_class(action)

    def evaluate(self) -> dict[str, Any]:
        if self._task is None:
            raise RuntimeError("call reset(task) and run the episode before evaluate()")
        with self._watchdog("evaluate"):
            return evaluate(self._task, answer=self._answer, last_url=self._live_page.url, page=self._page,
                            entries=self._entries, judge=self.judge, timeout_ms=self.timeout_ms)

    def observe(self) -> Observation:
        """The current page as the last step showed it (read again from the browser)."""
        if self._task is None:
            raise RuntimeError("call reset(task) before observe()")
        return self._observe()

    @property
    def played(self) -> tuple[str, ...]:
        """The actions stepped since reset, as given (valid or not): replaying them on `twin()`
        reaches this episode's state."""
        return tuple(self._played)

    def twin(self) -> WebEnvironment:
        """A second environment (its own server and database, its own browser context -- cookies,
        tabs -- in this one's browser, the same settings) reset to this episode's task and rule
        perturbation. The browser is shared because Playwright's sync API drives one driver per
        thread. There is one twin per environment: its server starts on the first call (~1 s) and
        every later call resets it again (~0.1 s), so a twin asked before is back at the start; it
        closes with this environment, and is driven from the same thread."""
        if self._given is None or self._closed:
            raise RuntimeError("call reset(task) on an open WebEnvironment before twin()")
        if self.world is None or not taskmod.uses_world(self._given[0]):
            raise RuntimeError(f"twin(): task {self._given[0].get('task_id')} runs on a site this environment does not "
                               "own (a WebArena deployment), whose state a twin would share; only the local web "
                               "world's tasks have twins")
        if self._twin is None or self._twin._closed:
            self._twin = WebEnvironment(judge=self.judge, timeout_s=self.timeout_ms / 1000,
                                        step_timeout_s=self.step_timeout_s, max_steps=self.max_steps,
                                        screenshot=self.screenshot, world=self.world is not None,
                                        chromium=self.chromium, viewport=self.viewport)
            self._twin._host = self
        task, rule = self._given
        self._twin.rule = rule
        self._twin.reset(task)
        return self._twin

    @property
    def ledger(self) -> list[LedgerEntry]:
        """Every ledger entry of this episode so far (ground truth; never shown to the agent)."""
        return list(self._entries)

    # -- internals -----------------------------------------------------------------------------
    def _result(self, delta: Delta, *, valid: bool, error: str | None,
                ledger: Sequence[LedgerEntry] = ()) -> StepResult:
        info: dict[str, object] = {"error": error} if error else {}
        info["ledger"] = [e.model_dump(mode="json") for e in ledger]
        obs = self._observe(error)
        return StepResult(observation=obs, delta=delta, done=self._done, valid=valid, info=info)

    def _execute(self, a: Action) -> None:
        page, context = self._live_page, self._live_context
        if a.kind in ("click", "hover", "type"):
            el, meta = self._element(a.element)
            if a.kind == "click":
                el.click(force=True)  # actionability is checked above (disabled) and by the tree; saves ~40 ms
            elif a.kind == "hover":
                el.hover()
            elif meta["tag"] == "select":
                el.select_option(label=a.text)
            elif meta["tag"] not in ("input", "textarea") or meta["type"] in ("checkbox", "radio", "submit", "button"):
                raise ActionError(f"type [{a.element}]: element is a {meta['tag']} {meta['type']}, not a text field; "
                                  f"use click [{a.element}]")
            else:
                el.fill(a.text[:2000])  # replaces the field's text, like selecting all and typing
                if a.enter:
                    el.press("Enter")
        elif a.kind == "press":
            page.keyboard.press(a.text)
        elif a.kind == "scroll":
            page.evaluate("(d) => window.scrollBy(0, d * window.innerHeight)", 1 if a.text == "down" else -1)
        elif a.kind == "goto":
            if urlparse(a.text).hostname not in self._allowed_hosts():
                raise ActionError(f"goto [{a.text[:80]}]: only the task's sites can be opened; use a URL on "
                                  f"{sorted(h for h in self._allowed_hosts() if h)}")
            page.goto(a.text, wait_until="load")
        elif a.kind == "go_back":
            page.go_back(wait_until="load")
        elif a.kind == "go_forward":
            page.go_forward(wait_until="load")
        elif a.kind == "new_tab":
            self._page = context.new_page()
        elif a.kind == "tab_focus":
            pages = context.pages
            if a.index is None or not 0 <= a.index < len(pages):
                raise ActionError(f"tab_focus [{a.index}]: there are {len(pages)} tabs; use an index from 0 to {len(pages) - 1}")
            self._page = pages[a.index]
            self._page.bring_to_front()
        elif a.kind == "close_tab":
            page.close()
            pages = context.pages
            self._page = pages[-1] if pages else context.new_page()
        elif a.kind == "stop":
            self._answer = a.text
        if a.kind not in ("stop", "new_tab"):
            self._live_page.wait_for_load_state("load")

    def _element(self, element_id: int | None) -> tuple[Locator, ElementMeta]:
        if element_id not in self._ids:
            raise ActionError(f"element [{element_id}] is not on the current page; use an id from the latest observation")
        self._tag += 1
        tag = f"t{self._tag}"
        cdp = self._cdp_session()
        obj = cdp.send("DOM.resolveNode", {"backendNodeId": element_id})["object"]["objectId"]
        meta: ElementMeta | None = cdp.send("Runtime.callFunctionOn", {"objectId": obj, "functionDeclaration": TAG_JS,
                                                   "arguments": [{"value": tag}], "returnByValue": True})["result"].get("value")
        if not meta:
            raise ActionError(f"element [{element_id}] is no longer on the page; use an id from the latest observation")
        if meta["disabled"]:
            raise ActionError(f"element [{element_id}] is disabled; it cannot be used now")
        return self._live_page.locator(f'[data-cdwm-target="{tag}"]'), meta

    def _cdp_session(self) -> CDPSession:
        page, context = self._live_page, self._live_context
        key = id(page)
        if key not in self._cdp:
            self._cdp = {k: v for k, v in self._cdp.items() if any(id(p) == k for p in context.pages)}
            self._cdp[key] = context.new_cdp_session(page)
        return self._cdp[key]

    def _observe(self, error: str | None = None) -> Observation:
        page = self._live_page
        try:
            with self._watchdog("observe"):
                tree = render(self._cdp_session().send("Accessibility.getFullAXTree")["nodes"])
                # The current tab's title is the tree's root name: one browser round trip fewer per step.
                tabs = [f"[{i}] " + (f"{tree.title!r} (current)" if p is page else repr(p.title()))
                        for i, p in enumerate(self._live_context.pages)]
                shot = page.screenshot(timeout=self.timeout_ms) if self.screenshot else None
        except EnvironmentClosed:
            raise
        except Exception as e:  # e.g. a page that is mid-navigation: report it, keep the episode
            tree, tabs, shot = render([]), [], None
            error = error or f"observation failed: {str(e).splitlines()[0][:200]}"
        self._ids = tree.ids
        head = f"URL: {page.url}\nTabs: {' '.join(tabs)}\n"
        text = head + (f"Error: {error}\n" if error else "") + tree.text
        return Observation(text=text, action_classes=ACTION_CLASSES, screenshot_png=shot,
                           info={"url": page.url, "step": getattr(self, "_steps", 0), HELP_KEY: ACTION_HELP})

    @contextmanager
    def _watchdog(self, what: str) -> Iterator[None]:
        """Per-call timeouts cover Playwright; this covers a browser that stops answering at all
        (CDP calls have no timeout of their own): the browser is killed and the call fails."""
        fired = threading.Event()

        def fire() -> None:
            fired.set()
            _kill(self._browser_procs, self._profile)

        timer = threading.Timer(self.step_timeout_s, fire)
        timer.daemon = True
        timer.start()
        try:
            yield
        except BaseException:
            if fired.is_set():
                self.close()
                raise EnvironmentClosed(f"{what} hung for {self.step_timeout_s:.0f} s; the browser was killed") from None
            raise
        finally:
            timer.cancel()


def _blocked_urls(hosts: set[str]) -> re.Pattern[str]:
    """Every URL whose host is not one of `hosts` (a userinfo trick like http://127.0.0.1@x/ is blocked)."""
    allowed = "|".join(re.escape(h) for h in sorted(hosts))
    return re.compile(rf"^(?!(https?|wss?)://({allowed})(:\d+)?([/?#]|$))")


def _descendants() -> dict[int, psutil.Process]:
    try:
        return {p.pid: p for p in psutil.Process().children(recursive=True)}
    except psutil.Error:
        return {}


def _profile_dir(procs: list[psutil.Process]) -> str | None:
    """The browser's temporary profile folder: it names every process of this browser, also
    renderers that outlive their parent."""
    for proc in procs:
        try:
            for arg in proc.cmdline():
                if arg.startswith("--user-data-dir="):
                    return arg
        except psutil.Error:
            pass
    return None


def _kill(known: list[psutil.Process], profile: str | None = None) -> None:
    """Kill the processes and whatever else runs with this browser's profile."""
    procs = list(known)
    if profile:
        procs += [p for p in psutil.process_iter(["cmdline"]) if profile in (p.info.get("cmdline") or [])]
    kill_trees(procs)
