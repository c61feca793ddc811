// The MCP Apps SDK's host side, bundled by setup.sh (esbuild) into one
// browser module for tests/browser/apps_host.html.
export { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge";
