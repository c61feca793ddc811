// Connects the official TypeScript SDK's Streamable HTTP client to a
// `chorus serve --http` that needs a token, without the token, twice: with
// no auth provider (the SDK's plain 401 path) and with an OAuth provider
// (its sign-in: protected-resource metadata, authorization-server metadata,
// client registration). Usage: node ts_no_token.mjs; CHORUS_URL is the
// server's /mcp URL. Prints one JSON line: the message each attempt ended
// with. Exits non-zero only when an attempt connects (it must not).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const url = new URL(process.env.CHORUS_URL);

/** A provider as an app with a sign-in keeps one: in memory, no browser. */
class MemoryProvider {
  redirected = [];
  information = undefined;
  saved = undefined;
  verifier = undefined;
  get redirectUrl() {
    return "http://127.0.0.1:9/callback";
  }
  get clientMetadata() {
    return { client_name: "ts-sdk-test", redirect_uris: [this.redirectUrl] };
  }
  clientInformation() {
    return this.information;
  }
  saveClientInformation(information) {
    this.information = information;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens) {
    this.saved = tokens;
  }
  redirectToAuthorization(url) {
    this.redirected.push(String(url));
  }
  saveCodeVerifier(verifier) {
    this.verifier = verifier;
  }
  codeVerifier() {
    return this.verifier;
  }
}

async function attempt(options) {
  const client = new Client({ name: "ts-sdk-test", version: "0" });
  try {
    await client.connect(new StreamableHTTPClientTransport(url, options));
  } catch (error) {
    return `${error?.name}: ${error?.message}`;
  } finally {
    await client.close().catch(() => {});
  }
  console.log(JSON.stringify({ connected: true }));
  process.exit(1);
}

const provider = new MemoryProvider();
const report = {
  plain: await attempt({}),
  oauth: await attempt({ authProvider: provider }),
  registered: provider.information !== undefined,
  redirected: provider.redirected,
};
console.log(JSON.stringify(report));
