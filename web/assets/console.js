// The console's one script: passkeys (WebAuthn). It registers a passkey on
// the Passkeys page and casts a passkey vote on an approval page; the
// server checks everything it sends. Its words come from the page (data
// attributes: card.ConsoleWords), as every word of the console.
"use strict";
(function () {
  const csrf = () => document.querySelector('meta[name="csrf"]').content;
  const enc = (buf) => btoa(String.fromCharCode(...new Uint8Array(buf))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  const dec = (s) => {
    s = s.replace(/-/g, "+").replace(/_/g, "/");
    while (s.length % 4) s += "=";
    return Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
  };
  async function post(url, body) {
    const r = await fetch(url, {
      method: "POST", credentials: "same-origin", body: JSON.stringify(body),
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf() },
    });
    const j = await r.json().catch(() => ({ error: document.body.dataset.unexpected }));
    if (!r.ok) throw new Error(j.error || document.body.dataset.refused);
    return j;
  }
  function say(out, msg, state) {
    out.textContent = msg;
    out.dataset.state = state;
  }

  const add = document.getElementById("add-passkey");
  if (add) {
    add.addEventListener("click", async () => {
      const out = document.getElementById("passkey-result");
      try {
        const { ceremony, options } = await post("/ui/passkeys/begin", {});
        const pk = options.publicKey;
        pk.challenge = dec(pk.challenge);
        pk.user.id = dec(pk.user.id);
        (pk.excludeCredentials || []).forEach((c) => { c.id = dec(c.id); });
        const cred = await navigator.credentials.create({ publicKey: pk });
        await post("/ui/passkeys/finish?ceremony=" + encodeURIComponent(ceremony), {
          id: cred.id, rawId: enc(cred.rawId), type: cred.type,
          response: {
            clientDataJSON: enc(cred.response.clientDataJSON),
            attestationObject: enc(cred.response.attestationObject),
            transports: cred.response.getTransports ? cred.response.getTransports() : [],
          },
        });
        say(out, add.dataset.done, "added");
      } catch (e) {
        say(out, e.message, "failed");
      }
    });
  }

  document.querySelectorAll("button.passkey-allow").forEach((btn) => {
    btn.addEventListener("click", async () => {
      const form = btn.closest("form");
      const out = form.querySelector(".passkey-result");
      const phrase = form.querySelector('input[name="phrase"]');
      try {
        const { ceremony, options } = await post(btn.dataset.begin, { ref: btn.dataset.ref, phrase: phrase ? phrase.value : "" });
        const pk = options.publicKey;
        pk.challenge = dec(pk.challenge);
        (pk.allowCredentials || []).forEach((c) => { c.id = dec(c.id); });
        const a = await navigator.credentials.get({ publicKey: pk });
        await post(btn.dataset.finish + "?ceremony=" + encodeURIComponent(ceremony), {
          id: a.id, rawId: enc(a.rawId), type: a.type,
          response: {
            clientDataJSON: enc(a.response.clientDataJSON),
            authenticatorData: enc(a.response.authenticatorData),
            signature: enc(a.response.signature),
            userHandle: a.response.userHandle ? enc(a.response.userHandle) : null,
          },
        });
        say(out, btn.dataset.done, "allowed");
        location.reload();
      } catch (e) {
        say(out, e.message, "failed");
      }
    });
  });
})();
