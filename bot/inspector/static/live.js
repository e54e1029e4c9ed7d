// threadbot inspector: a conversation's page, kept up to date from its event stream.
// Each "item" event is one timeline item (its seq and HTML): put in its place, or put in
// place of the item with that seq. "status" replaces the header. The browser's
// EventSource reconnects by itself and sends the last event id (the newest seq this
// page has), so the server sends what came after it. "signed_out" (the session no longer
// holds) ends the stream: the page says so and stops following.
(function () {
  "use strict";
  var root = document.getElementById("conversation");
  if (!root || !window.EventSource) {
    return;
  }
  var list = document.getElementById("timeline");
  var header = document.getElementById("header");

  function element(html) {
    var holder = document.createElement("template");
    holder.innerHTML = html.trim();
    return holder.content.firstElementChild;
  }

  function place(seq, node) {
    var old = list.querySelector('li[data-seq="' + seq + '"]');
    if (old) {
      old.replaceWith(node);
      return;
    }
    var later = null;
    for (var i = 0; i < list.children.length; i++) {
      if (Number(list.children[i].dataset.seq) > seq) {
        later = list.children[i];
        break;
      }
    }
    list.insertBefore(node, later);
  }

  var source = new EventSource(root.dataset.events + "?after=" + root.dataset.lastSeq);
  source.addEventListener("open", function () {
    document.getElementById("live").hidden = false;
  });
  source.addEventListener("item", function (event) {
    var data = JSON.parse(event.data);
    place(data.seq, element(data.html));
    if (data.seq > Number(root.dataset.lastSeq)) {
      root.dataset.lastSeq = String(data.seq);
    }
  });
  source.addEventListener("status", function (event) {
    var data = JSON.parse(event.data);
    header.innerHTML = data.html;
    root.dataset.lifecycle = data.lifecycle;
  });
  source.addEventListener("signed_out", function () {
    source.close();
    var live = document.getElementById("live");
    live.textContent = "Signed out: this page no longer follows the run. Reload to sign in again.";
    live.hidden = false;
  });
  source.addEventListener("end", function () {
    source.close();
    document.getElementById("live").hidden = true;
  });
})();
