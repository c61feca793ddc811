// chorus run viewer: the little that needs script. Pages read fine without
// it; this adds copying, member tabs on narrow screens, and live updates of
// a run in flight (Server-Sent Events from /runs/ID/events).
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  for (const button of document.querySelectorAll("[data-copy]")) {
    button.hidden = false;
    button.addEventListener("click", async () => {
      const source = document.getElementById(button.dataset.copy);
      if (!source || !navigator.clipboard) return;
      try {
        await navigator.clipboard.writeText(source.dataset.text || source.innerText);
        button.textContent = "Copied";
      } catch (e) {
        button.textContent = "Copy failed";
      }
    });
  }

  const tabs = document.querySelector(".member-tabs");
  if (tabs) {
    const cards = document.querySelectorAll(".member");
    const select = (id) => {
      for (const card of cards) card.classList.toggle("chosen", card.id === id);
      for (const tab of tabs.querySelectorAll("a")) {
        tab.setAttribute("aria-selected", tab.hash === "#" + id ? "true" : "false");
      }
    };
    tabs.classList.add("scripted");
    document.querySelector(".members").classList.add("scripted");
    for (const tab of tabs.querySelectorAll("a")) {
      tab.addEventListener("click", (event) => {
        event.preventDefault();
        select(tab.hash.slice(1));
      });
    }
    if (cards.length) select(cards[0].id);
  }

  const live = document.querySelector("[data-live]");
  if (live && live.id && window.EventSource) {
    const source = new EventSource(live.dataset.live);
    const refresh = () =>
      // Pages are made by the server: fetch this one again and swap in
      // the part that changes.
      fetch(window.location.href, { credentials: "same-origin" })
        .then((response) => response.text())
        .then((text) => {
          const fresh = new DOMParser().parseFromString(text, "text/html");
          const part = fresh.getElementById(live.id);
          const current = document.getElementById(live.id);
          if (part && current) current.replaceWith(part);
        })
        .catch(() => {});
    source.addEventListener("changed", refresh);
    source.addEventListener("done", () => {
      source.close();
      refresh();
    });
  }
});
