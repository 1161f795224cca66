"""The script that takes a rendered page's DOM: the snapshot (`crawler.render.settle` has
the tracker that says when to take it).

It runs in the page. It serializes the document following the HTML fragment serialization
algorithm, iteratively (a deep DOM cannot overflow the stack), with each open shadow root
inlined in its host as ``<crawler-shadow-root>`` (an element the extractor walks into, where a
``<template shadowrootmode>`` would be skipped as inert template content), and gathers the ids
fragment navigation finds.
"""

from __future__ import annotations

SHADOW_ROOT_TAG = "crawler-shadow-root"

SNAPSHOT = """
() => {
  const VOID = new Set(["area", "base", "basefont", "bgsound", "br", "col", "embed", "frame",
    "hr", "img", "input", "keygen", "link", "meta", "param", "source", "track", "wbr"]);
  const RAW = new Set(["style", "script", "xmp", "iframe", "noembed", "noframes", "plaintext",
    "noscript"]);
  const HTML_NS = "http://www.w3.org/1999/xhtml";
  const SHADOW = "__SHADOW__";
  const escText = (s) => s.replace(/&/g, "&amp;").replace(/\\u00a0/g, "&nbsp;")
    .replace(/</g, "&lt;").replace(/>/g, "&gt;");
  const escAttr = (s) => s.replace(/&/g, "&amp;").replace(/\\u00a0/g, "&nbsp;")
    .replace(/"/g, "&quot;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  const out = [];
  // A stack of work: a node to open, or a string to write when its children are done.
  const stack = [document];
  while (stack.length) {
    const item = stack.pop();
    if (typeof item === "string") { out.push(item); continue; }
    const node = item;
    let kids = null;
    switch (node.nodeType) {
      case 9: case 11: kids = node; break;  // document, shadow root
      case 10: out.push("<!DOCTYPE " + node.name + ">"); break;
      case 8: out.push("<!--" + node.data + "-->"); break;
      case 3: case 4: {
        const p = node.parentNode;
        const raw = p && p.nodeType === 1 && p.namespaceURI === HTML_NS && RAW.has(p.localName);
        out.push(raw ? node.data : escText(node.data));
        break;
      }
      case 1: {
        const name = node.namespaceURI === HTML_NS ? node.localName : node.tagName;
        let open = "<" + name;
        for (const a of node.attributes) open += " " + a.name + '="' + escAttr(a.value) + '"';
        out.push(open + ">");
        if (node.namespaceURI === HTML_NS && VOID.has(node.localName)) break;
        stack.push("</" + name + ">");
        const body = node.localName === "template" && node.content ? node.content : node;
        const children = Array.from(body.childNodes);
        for (let i = children.length - 1; i >= 0; i--) stack.push(children[i]);
        if (node.shadowRoot) {  // open roots only: a closed one is null here
          stack.push("</" + SHADOW + ">");
          stack.push(node.shadowRoot);
          stack.push("<" + SHADOW + ">");
        }
        break;
      }
    }
    if (kids) {
      const children = Array.from(kids.childNodes);
      for (let i = children.length - 1; i >= 0; i--) stack.push(children[i]);
    }
  }
  const ids = [];
  for (const el of document.querySelectorAll("[id]")) if (el.id) ids.push(el.id);
  for (const el of document.getElementsByTagName("a")) {
    const n = el.getAttribute("name");
    if (n) ids.push(n);
  }
  return {html: out.join(""), url: location.href, ids};
}
""".replace("__SHADOW__", SHADOW_ROOT_TAG)
