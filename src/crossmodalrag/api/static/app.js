// mem console: streams answers, links citations to their evidence, keyboard paths, theme, charts.
// Served under a CSP without 'unsafe-inline' or 'unsafe-eval': no inline handlers, no eval, no innerHTML
// of model output (answer text is inserted as text nodes only).
(() => {
  "use strict";
  const $ = (selector, root = document) => root.querySelector(selector);
  const root = document.documentElement;

  // ---- theme: the OS preference until the user picks one
  const savedTheme = localStorage.getItem("mem-theme");
  if (savedTheme) root.dataset.theme = savedTheme;
  function toggleTheme() {
    const dark = root.dataset.theme ? root.dataset.theme === "dark" : matchMedia("(prefers-color-scheme: dark)").matches;
    root.dataset.theme = dark ? "light" : "dark";
    localStorage.setItem("mem-theme", root.dataset.theme);
  }

  // ---- asking
  let controller = null;
  let evidenceLinks = [];
  let current = -1;

  function el(tag, attrs = {}, text = "") {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
    if (text) node.textContent = text;
    return node;
  }

  function evidenceHref(item) {
    return `/ui/sources/${item.source_id}?chunk=${item.chunk_id}#chunk-${item.chunk_id}`;
  }

  async function ask(question, noLlm) {
    if (controller) controller.abort(); // a new question replaces one still being answered
    const mine = (controller = new AbortController());
    const params = new URLSearchParams({ q: question });
    if (noLlm) params.set("no_llm", "true");
    history.replaceState(null, "", "/?" + params.toString());
    startAnswer(noLlm);
    try {
      await streamAnswer(params, mine.signal);
    } catch (error) {
      if (!mine.signal.aborted) showError(String(error), "is `mem serve` still running?");
    } finally {
      if (controller === mine) finishAnswer();
    }
  }

  function startAnswer(noLlm) {
    const answer = $("#answer"), text = $("#answer-text");
    answer.hidden = false;
    answer.classList.remove("abstained");
    answer.dataset.state = "streaming";
    answer.dataset.tokens = "0";
    text.textContent = "";
    text.classList.add("streaming");
    $("#answer-status").textContent = noLlm ? "retrieving…" : "retrieving, then generating…";
    $("#evidence").replaceChildren();
    $("#notices").replaceChildren();
    $("#stop-button").hidden = false;
  }

  function finishAnswer() {
    controller = null;
    $("#answer-text").classList.remove("streaming");
    $("#stop-button").hidden = true;
  }

  // Once `signal` aborts (a newer question, Stop, Esc) the read in progress rejects: nothing more of
  // this stream is shown, and the server stops generating when the connection goes.
  async function streamAnswer(params, signal) {
    const response = await fetch("/ask/stream?" + params.toString(), { signal });
    if (!response.ok) {
      const problem = await response.json().catch(() => ({}));
      if (!signal.aborted) showError(problem.error || `HTTP ${response.status}`, problem.hint || "");
      return;
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let newline;
      while ((newline = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + 1);
        if (line.trim()) handle(JSON.parse(line));
      }
    }
    if ($("#answer").dataset.state === "streaming") showError("the answer stream ended early", "ask again");
  }

  // Returns whether there was an answer to stop (Esc then has nothing else to do).
  function stopAnswer() {
    const answer = $("#answer");
    if (!controller || !answer || answer.dataset.state !== "streaming") return false;
    controller.abort();
    finishAnswer();
    answer.dataset.state = "stopped";
    $("#answer-status").textContent = "stopped: Ask asks again";
    return true;
  }

  function handle(event) {
    const answer = $("#answer");
    if (event.type === "token") {
      $("#answer-text").append(document.createTextNode(event.text));
      answer.dataset.tokens = String(Number(answer.dataset.tokens) + 1);
      $("#answer-status").textContent = "generating…";
    } else if (event.type === "answer") {
      renderAnswer(event);
      keepAnswer(event);
    } else if (event.type === "error") {
      showError(event.error, event.hint);
    }
  }

  function showError(message, hint) {
    const answer = $("#answer");
    answer.dataset.state = "error";
    $("#answer-status").textContent = "error";
    $("#answer-text").textContent = message + (hint ? ` (hint: ${hint})` : "");
  }

  function renderAnswer(payload) {
    const answer = $("#answer"), text = $("#answer-text");
    const byId = new Map(payload.evidence.map((item) => [item.id, item]));
    text.replaceChildren();
    // An evidence answer (no model) lists the evidence, which the cards below show better: keep its
    // first line ("Found 5 pieces of evidence:") and let the cards speak.
    const shown = payload.mode === "evidence" && !payload.abstained ? payload.answer.split("\n")[0] : payload.answer;
    for (const part of shown.split(/(\[E\d+\])/)) {
      const item = byId.get(part.slice(1, -1));
      if (/^\[E\d+\]$/.test(part) && item) {
        const link = el("a", { class: "cite", href: evidenceHref(item), "data-eid": item.id }, part);
        text.append(link);
      } else if (part) {
        text.append(document.createTextNode(part));
      }
    }
    answer.classList.toggle("abstained", payload.abstained);
    const bits = [payload.mode === "llm" && payload.llm ? `${payload.llm.provider} ${payload.llm.model}` : "evidence answer"];
    bits.push(`${payload.retrieval} retrieval`);
    if (payload.abstained) bits.push(`abstained: ${payload.abstention_reason}`);
    else bits.push(`${payload.evidence.length} evidence, ${payload.citations.length} cited`);
    bits.push(`coverage ${(payload.match_coverage * 100).toFixed(0)}%`);
    if (payload.similarity !== null) bits.push(`similarity ${payload.similarity.toFixed(2)}`);
    bits.push(`${(payload.timing.total_seconds * 1000).toFixed(0)} ms`);
    $("#answer-status").textContent = bits.join(" · ");
    const notices = $("#notices");
    for (const message of payload.notices) notices.append(el("li", {}, message));
    for (const warning of payload.citation_warnings) notices.append(el("li", {}, `${warning.kind}: ${warning.detail}`));
    const list = $("#evidence");
    const cited = new Set(payload.citations.map((c) => c.id));
    for (const item of payload.evidence) list.append(evidenceItem(item, cited.has(item.id)));
    evidenceLinks = [...list.querySelectorAll("a.ev-open")];
    current = -1;
    answer.dataset.state = "final";
  }

  // Every reply is no-store (a private memory stays out of caches), so the back-forward cache never
  // keeps this page: Back to it loaded it afresh and asked its ?q= again (with a model, another minute
  // and perhaps another answer). This history entry keeps only the id the server gave the finished
  // answer, never its text: the browser writes history state to its profile on disk, and text erased
  // with `mem forget` must not come back from there. The server hands the answer back only while all
  // its evidence is still stored (api/kept.py); otherwise the question is asked again.
  function keepAnswer(payload) {
    if (payload.kept) history.replaceState({ kept: payload.kept }, "", location.href);
  }

  async function showKeptAnswer(keptId, question, noLlm) {
    let payload = null;
    try {
      const response = await fetch("/ask/kept/" + encodeURIComponent(keptId));
      if (response.ok) payload = await response.json();
    } catch (error) {
      // unreachable: asking again says so
    }
    if (controller) return; // a question asked meanwhile owns the answer now
    if (!payload) {
      ask(question, noLlm);
      return;
    }
    const answer = $("#answer");
    answer.hidden = false;
    renderAnswer(payload);
    const status = $("#answer-status");
    status.textContent = `kept from earlier in this tab (Ask asks again) · ${status.textContent}`;
  }

  function evidenceItem(item, cited) {
    const li = el("li", { id: `ev-${item.id}` });
    const head = el("div", { class: "ev-head" });
    head.append(el("span", { class: "ev-id" }, `[${item.id}]`));
    head.append(el("a", { class: "ev-open", href: evidenceHref(item), "data-eid": item.id }, item.title || item.locator));
    head.append(el("span", { class: "kind" }, item.modality));
    if (!cited) head.append(el("span", { class: "sub" }, "not cited"));
    li.append(head);
    li.append(el("div", { class: "sub" }, item.locator + (item.timestamp ? ` · ${item.timestamp.slice(0, 10)}` : "")));
    li.append(el("p", { class: "excerpt" }, item.excerpt));
    const details = el("details");
    details.append(el("summary", {}, `why it ranked: score ${item.score.toFixed(3)}`));
    const table = el("table");
    for (const [name, value] of Object.entries(item.components)) {
      const row = el("tr");
      row.append(el("td", {}, name), el("td", {}, Number(value).toFixed(3)));
      table.append(row);
    }
    details.append(table);
    li.append(details);
    return li;
  }

  function openEvidence(link) {
    document.querySelectorAll("#evidence li.current").forEach((li) => li.classList.remove("current"));
    const li = $(`#ev-${link.dataset.eid}`);
    if (li) li.classList.add("current");
    current = evidenceLinks.findIndex((a) => a.dataset.eid === link.dataset.eid);
    const panel = $("#panel");
    if (!panel || !window.htmx) {
      location.href = link.href;
      return;
    }
    const [address, anchor] = link.getAttribute("href").split("#");
    htmx.ajax("GET", address, { target: "#panel", swap: "innerHTML" }).then(
      () => {
        panel.dataset.loaded = link.dataset.eid;
        // By the anchor's id, not `.chunk.cited`: until htmx settles, a new chunk with the id of the
        // previously cited one still carries its old class, and would be found first.
        scrollToCited(panel, anchor ? panel.querySelector(`#${CSS.escape(anchor)}`) : null);
      },
      () => {}, // aborted (Escape) or unreachable: panelUnreachable says so
    );
  }

  // htmx swaps no 4xx/5xx reply: the panel would keep the evidence opened before, as if it were this
  // citation's. The console's error fragment (the server's one line and hint) is shown instead.
  function panelErrorReply(event) {
    if (event.detail.target && event.detail.target.id === "panel" && event.detail.xhr.status >= 400) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  }

  function unreachableNote(heading) {
    const note = el("div", { class: "error-state", role: "alert" });
    note.append(el(heading, {}, "the server could not be reached"), el("p", {}, "hint: is `mem serve` still running?"));
    return note;
  }

  function panelUnreachable(event) {
    const panel = event.detail.target;
    if (!panel || panel.id !== "panel") return;
    panel.replaceChildren(unreachableNote("h1"));
    panel.dataset.loaded = "unreachable"; // Escape clears it like any opened evidence
  }

  // A filter the server never got left the form showing it over the list of the filters before.
  // The list keeps its id: the next filter, once the server is back, replaces it as usual.
  function filterUnreachable(event) {
    const list = event.detail.target;
    if (list && list.id === "source-list") list.replaceChildren(unreachableNote("h2"));
  }

  // A page image or picture the server refuses (its file changed on disk or is gone since it was
  // ingested) showed as a broken image: say what the server says instead, with its hint.
  async function imageRefused(event) {
    const image = event.target;
    if (!(image instanceof HTMLImageElement) || !image.matches("img.pdf-page, .image-view img")) return;
    let reply = {};
    try {
      const response = await fetch(image.src, { headers: { Accept: "application/json" } });
      if (response.ok) return; // a failure of this load alone: the image itself is fine
      reply = await response.json();
    } catch (error) {
      reply = { error: "the server could not be reached", hint: "is `mem serve` still running?" };
    }
    const note = el("p", { class: "error-state", role: "alert" }, reply.error || "the image could not be shown");
    if (reply.hint) note.append(el("br"), document.createTextNode(`hint: ${reply.hint}`));
    image.replaceWith(note);
  }

  function scrollToCited(scope, cited = scope.querySelector(".chunk.cited")) {
    if (!cited) return;
    if (scope.id === "panel" && scope.scrollHeight > scope.clientHeight) {
      // the panel scrolls, the page stays put
      scope.scrollTop += cited.getBoundingClientRect().top - scope.getBoundingClientRect().top - 8;
    } else {
      // a page, or at phone width the panel stacked below the answer at its full height: the page scrolls
      cited.scrollIntoView({ block: "start" });
    }
  }

  function moveEvidence(step) {
    if (!evidenceLinks.length) return;
    current = Math.max(0, Math.min(evidenceLinks.length - 1, current + step));
    const link = evidenceLinks[current];
    link.focus();
    openEvidence(link);
  }

  // ---- charts (uPlot): data comes from a JSON block in the page
  function drawMonthChart() {
    const box = $("#month-chart"), data = $("#month-data");
    if (!box || !data || !window.uPlot) return;
    const series = JSON.parse(data.textContent);
    if (!series.months.length) {
      box.textContent = "No dated sources yet.";
      return;
    }
    const xs = series.months.map((_, i) => i);
    const bars = uPlot.paths.bars({ size: [0.7, 40] });
    const options = {
      width: Math.max(280, box.clientWidth || 600),
      height: 240,
      scales: { x: { time: false } },
      axes: [
        { values: (u, ticks) => ticks.map((t) => series.months[t] || ""), stroke: getComputedStyle(root).getPropertyValue("--muted") },
        { stroke: getComputedStyle(root).getPropertyValue("--muted") },
      ],
      series: [{}, { label: "sources", fill: "rgba(26,95,180,0.45)", stroke: "#1a5fb4", paths: bars, points: { show: false } }],
      legend: { show: false },
    };
    new uPlot(options, [xs, series.sources], box);
    box.dataset.drawn = "1";
  }

  // ---- the Sources filter form (htmx submits it on a change of any field and on submit)
  // Enter in the Folder box fires `change` and then `submit`: the second asked for the same list again,
  // and pushed a second history entry. A request for the list already on its way is not sent twice.
  // (htmx:confirm, not htmx:beforeRequest: htmx queues the second before its beforeRequest fires.)
  let filterOnItsWay = null;

  function filterQuery(form) {
    return new URLSearchParams(new FormData(form)).toString();
  }

  function skipRepeatedFilter(event) {
    const form = event.detail.elt;
    if (!form || form.id !== "source-filter") return;
    const query = filterQuery(form);
    if (query === filterOnItsWay) event.preventDefault();
    else filterOnItsWay = query;
  }

  function filterArrived(event) {
    if (event.detail.elt && event.detail.elt.id === "source-filter") filterOnItsWay = null;
  }

  // Back and Forward restore a snapshot of the page: the list as it was, but the form as first rendered
  // (typed values are not in the snapshot). The URL holds the filters of the list on screen: show them,
  // or the next change would silently drop the others.
  function filterFromAddress() {
    const form = $("#source-filter");
    if (!form) return;
    const params = new URLSearchParams(location.search);
    for (const field of form.elements) {
      if (field.name) field.value = params.get(field.name) || "";
    }
    filterOnItsWay = null;
  }

  // ---- wiring
  document.addEventListener("htmx:confirm", skipRepeatedFilter);
  document.addEventListener("htmx:afterRequest", filterArrived);
  document.addEventListener("htmx:historyRestore", filterFromAddress);
  document.addEventListener("htmx:beforeSwap", panelErrorReply);
  document.addEventListener("htmx:sendError", panelUnreachable);
  document.addEventListener("htmx:sendError", filterUnreachable);
  document.addEventListener("error", imageRefused, true); // a load error does not bubble: caught on its way down
  document.addEventListener("DOMContentLoaded", () => {
    const theme = $("#theme");
    if (theme) theme.addEventListener("click", toggleTheme);
    const form = $("#ask-form");
    if (form) {
      $("#stop-button").addEventListener("click", stopAnswer);
      form.addEventListener("submit", (event) => {
        event.preventDefault();
        const question = $("#q").value.trim();
        if (!question) return;
        // Keys are ignored while the box (or the no-LLM box) has focus, and focus stayed there after
        // asking: j typed a "j". Its question asked, the page takes the keys; / brings the box back.
        if (form.contains(document.activeElement)) document.activeElement.blur();
        ask(question, $("#no-llm").checked);
      });
      const params = new URLSearchParams(location.search);
      if (params.get("no_llm") === "true") $("#no-llm").checked = true;
      const kept = history.state && history.state.kept;
      if (params.get("q") && kept) showKeptAnswer(kept, params.get("q"), $("#no-llm").checked);
      else if (params.get("q")) ask(params.get("q"), $("#no-llm").checked);
    }
    scrollToCited(document);
    drawMonthChart();
  });

  document.addEventListener("click", (event) => {
    const link = event.target.closest("a.cite, a.ev-open");
    if (!link || event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) return;
    event.preventDefault();
    openEvidence(link);
  });

  document.addEventListener("keydown", (event) => {
    const typing = event.target.closest("input, textarea, select, [contenteditable]");
    if (event.key === "Escape") {
      if (typing) event.target.blur();
      if (stopAnswer()) return;
      const panel = $("#panel");
      if (panel && window.htmx) htmx.trigger(panel, "htmx:abort"); // a panel still loading must not open after Escape
      if (panel && panel.dataset.loaded) {
        panel.replaceChildren();
        delete panel.dataset.loaded;
      }
      return;
    }
    if (typing || event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.key === "/") {
      const box = $("#q");
      if (box) {
        event.preventDefault();
        box.focus();
        box.select();
      }
    } else if (event.key === "j") {
      moveEvidence(1);
    } else if (event.key === "k") {
      moveEvidence(-1);
    }
  });
})();
