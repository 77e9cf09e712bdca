/**
 * The notes MCP server over stdio, run as a child process (`node --import tsx`) by the MCP tests.
 * NOTES_LEDGER names the file its calls are appended to, so the test counts the child's writes.
 */
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { notesMcpServer, NotesStore } from "./notes-server.js";

const ledger = process.env.NOTES_LEDGER;
if (ledger === undefined || ledger === "") throw new Error("NOTES_LEDGER is not set");
await notesMcpServer(new NotesStore(ledger)).connect(new StdioServerTransport());
