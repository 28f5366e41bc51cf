// Reader of a /machine/map long-poll stream: messages are `u32 little-endian length | body`, body = one zstd frame
// of the JSON MapResponse when the request said Compress:"zstd" (tailscale control/controlclient direct.go reads the
// length, then exactly that many bytes). Written for the bench apart from the server's map-frame.ts.
import zlib from 'node:zlib';

/** The tailcfg.Node fields the benchmarks look at. */
export interface MapNode {
  ID: number;
  Key: string;
  Online?: boolean;
  PrimaryRoutes?: string[];
}

/** The MapResponse fields the benchmarks look at; the rest is kept as parsed. */
export interface MapMessage {
  KeepAlive?: boolean;
  Node?: MapNode & { [k: string]: unknown };
  Peers?: MapNode[];
  PeersChanged?: MapNode[];
  PeersRemoved?: number[];
  PeersChangedPatch?: { NodeID: number; Online?: boolean; [k: string]: unknown }[];
  [k: string]: unknown;
}

/** One message's size: framed and compressed as on the wire, and its JSON after decompression. */
export interface MessageSize {
  wire: number;
  json: number;
}

export class MapFrameReader {
  // Chunks not yet consumed. A full map arrives in many chunks; joining them only once the whole message is there
  // keeps a multi-megabyte map from being copied once per chunk.
  private chunks: Buffer[] = [];
  private queued = 0;
  private need = 4;
  private readonly compressed: boolean;
  /** Bytes received, compressed as on the wire (framing included). */
  wireBytes = 0;
  /** Bytes of JSON after decompression. */
  jsonBytes = 0;
  /** The size of each message the last push() returned, in the same order. */
  sizes: MessageSize[] = [];

  constructor(compressed: boolean) {
    this.compressed = compressed;
  }

  /** Feeds a chunk; returns every message it completed. Throws on a body that is not zstd/JSON. */
  push(chunk: Buffer): MapMessage[] {
    this.wireBytes += chunk.length;
    this.chunks.push(chunk);
    this.queued += chunk.length;
    const out: MapMessage[] = [];
    this.sizes = [];
    while (this.queued >= this.need) {
      const buf = this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks);
      this.chunks = [buf];
      const len = buf.readUInt32LE(0);
      if (buf.length < 4 + len) {
        this.need = 4 + len;
        break;
      }
      const body = buf.subarray(4, 4 + len);
      const json = this.compressed ? zlib.zstdDecompressSync(body) : body;
      this.jsonBytes += json.length;
      this.sizes.push({ wire: 4 + len, json: json.length });
      out.push(JSON.parse(json.toString('utf8')) as MapMessage);
      const rest = buf.subarray(4 + len);
      this.chunks = rest.length > 0 ? [rest] : [];
      this.queued = rest.length;
      this.need = 4;
    }
    return out;
  }
}
