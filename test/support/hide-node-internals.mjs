// Preloaded (node --import) to play a Node release that renamed the private
// fields of its HTTP server the service relies on: Node's own code still
// reads and writes them, every other caller sees them missing, and writes
// from outside Node are ignored.
import http from 'node:http'
import net from 'node:net'

// The frame that called the accessor is Node's own code.
function calledFromNode () {
  const frame = new Error().stack?.split('\n')[3] ?? ''
  return /\(node:|at node:/.test(frame)
}

function hide (proto, name) {
  const key = Symbol(name)
  Object.defineProperty(proto, name, {
    configurable: true,
    get () { return calledFromNode() ? this[key] : undefined },
    set (value) { if (calledFromNode()) this[key] = value }
  })
}

hide(net.Socket.prototype, '_httpMessage')
hide(net.Socket.prototype, '_paused')
hide(http.Server.prototype, 'httpAllowHalfOpen')
