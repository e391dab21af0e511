// A small, mechanical N-API binding of the libfuse3 low-level API (issue 18). All filesystem logic
// lives in TypeScript (fuse/lowlevel/): this file only moves requests, replies and notifications.
//
// - Requests are read on the JavaScript thread: libuv polls the session's /dev/fuse descriptor (non-
//   blocking) and, when it is readable, every request waiting is read and handed to the JavaScript
//   handler at once, with a request handle (the fuse_req_t as a Number); JavaScript answers it later
//   with one of the reply functions. No thread sits between the kernel and JavaScript: each request
//   wakes one thread, not two (a session thread handing requests over by thread-safe function cost a
//   second wake-up, ~15-60 us per request on a busy 2-vCPU machine).
// - Invalidations (notify_inval_inode / notify_inval_entry / notify_delete) are queued to a thread of
//   their own: sent from the thread that answers requests they can deadlock in the kernel.
// - forget/forget_multi are answered here (they need no reply) and passed on for the inode table.
#define FUSE_USE_VERSION 34
#include <fuse_lowlevel.h>
#include <napi.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <uv.h>

namespace {

// Operation codes, mirrored in fuse/lowlevel/native.ts (Op).
enum Op {
  OP_LOOKUP = 1,
  OP_FORGET,
  OP_GETATTR,
  OP_SETATTR,
  OP_READLINK,
  OP_MKDIR,
  OP_UNLINK,
  OP_RMDIR,
  OP_SYMLINK,
  OP_RENAME,
  OP_LINK,
  OP_OPEN,
  OP_READ,
  OP_WRITE,
  OP_FLUSH,
  OP_RELEASE,
  OP_FSYNC,
  OP_READDIR,
  OP_STATFS,
  OP_ACCESS,
  OP_CREATE,
  OP_MKNOD,
  OP_ENDED,  // no more requests (unmounted from outside, unmount(), or the kernel ended the session)
  OP_READDIRPLUS,
};

struct Request {
  int op = 0;
  fuse_req_t req = nullptr;
  double ino = 0;
  double a = 0, b = 0, c = 0, d = 0;
  std::string s1, s2;
  bool s1Set = false, s1Bad = false, s2Set = false, s2Bad = false;
  // A write's bytes: libfuse's buffer, valid while the request is delivered (Deliver is synchronous).
  const char* data = nullptr;
  size_t dataLen = 0;
  bool hasData = false;
  bool hasAttr = false;
  struct stat attr {};
  int toSet = 0;
  uint32_t uid = 0, gid = 0;  // the caller's ids (fuse_req_ctx)
};

bool validUtf8(const char* s) {
  const unsigned char* p = reinterpret_cast<const unsigned char*>(s);
  while (*p) {
    unsigned c = *p;
    int n = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : -1;
    if (n < 0 || (n == 1 && c < 0xc2) || (n == 3 && c > 0xf4)) return false;
    unsigned cp = n == 0 ? c : c & (0x3f >> n);
    p++;
    for (int i = 0; i < n; i++, p++) {
      if ((*p & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (*p & 0x3f);
    }
    if ((n == 2 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff))) return false;
  }
  return true;
}

void setName(std::string& dst, bool& set, bool& bad, const char* name) {
  set = true;
  if (validUtf8(name)) dst = name;
  else bad = true;  // delivered as null: TypeScript answers EILSEQ
}

// A time in nanoseconds since the epoch (a BigInt: explicit times keep their full precision).
int64_t timeNs(const struct timespec& t) { return static_cast<int64_t>(t.tv_sec) * 1000000000LL + t.tv_nsec; }

void CallJs(Napi::Env env, Napi::Function handler, Request* r);

struct Notice {
  int kind;  // 0 inval_inode, 1 inval_entry, 2 delete
  fuse_ino_t ino;
  fuse_ino_t child;
  int64_t off, len;
  std::string name;
};

struct Session {
  struct fuse_session* se = nullptr;
  napi_env env = nullptr;
  Napi::FunctionReference handler;
  napi_async_context async = nullptr;
  uv_poll_t* poll = nullptr;  // null once closed
  struct fuse_buf buf {};
  std::thread notifier;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Notice> notices;
  bool stopping = false;
  bool mounted = false;
  bool ended = false;  // the poll handle is closed and OP_ENDED was reported
  uint64_t capsWant = 0, capsUnwant = 0;
};

Session* g = nullptr;  // one session per process: the mount process serves one mountpoint

// Called on the JavaScript thread, inside OnReadable's handle and callback scopes.
void Deliver(Request* r) {
  if (!g || g->handler.IsEmpty()) {
    if (r->req) fuse_reply_err(r->req, EIO);
    delete r;
    return;
  }
  Napi::Env env(g->env);
  try {
    CallJs(env, g->handler.Value(), r);
  } catch (const Napi::Error& e) {
    // A handler that threw synchronously: an uncaught exception, as it would be from an event.
    napi_fatal_exception(g->env, e.Value());
  }
}

Request* Make(int op, fuse_req_t req, fuse_ino_t ino) {
  Request* r = new Request();
  r->op = op;
  r->req = req;
  r->ino = static_cast<double>(ino);
  if (req) {
    const struct fuse_ctx* ctx = fuse_req_ctx(req);
    r->uid = ctx->uid;
    r->gid = ctx->gid;
  }
  return r;
}

double fhOf(struct fuse_file_info* fi) { return fi ? static_cast<double>(fi->fh) : -1; }

// ---------- the operation table: each packs its arguments and hands them over ----------

void ll_init(void*, struct fuse_conn_info* conn) {
  conn->want |= static_cast<unsigned>(g->capsWant) & conn->capable;
  conn->want &= ~static_cast<unsigned>(g->capsUnwant);
}

void ll_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  Request* r = Make(OP_LOOKUP, req, parent);
  setName(r->s1, r->s1Set, r->s1Bad, name);
  Deliver(r);
}

void ll_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  fuse_reply_none(req);
  Request* r = Make(OP_FORGET, nullptr, ino);
  r->a = static_cast<double>(nlookup);
  Deliver(r);
}

void ll_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data* forgets) {
  std::vector<Request*> rs;
  for (size_t i = 0; i < count; i++) {
    Request* r = Make(OP_FORGET, nullptr, forgets[i].ino);
    r->a = static_cast<double>(forgets[i].nlookup);
    rs.push_back(r);
  }
  fuse_reply_none(req);
  for (Request* r : rs) Deliver(r);
}

void ll_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  Request* r = Make(OP_GETATTR, req, ino);
  r->a = fhOf(fi);
  Deliver(r);
}

void ll_setattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, struct fuse_file_info* fi) {
  Request* r = Make(OP_SETATTR, req, ino);
  r->a = fhOf(fi);
  r->hasAttr = true;
  r->attr = *attr;
  r->toSet = to_set;
  Deliver(r);
}

void ll_readlink(fuse_req_t req, fuse_ino_t ino) { Deliver(Make(OP_READLINK, req, ino)); }

void ll_mknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev) {
  Request* r = Make(OP_MKNOD, req, parent);
  setName(r->s1, r->s1Set, r->s1Bad, name);
  r->a = mode;
  r->b = static_cast<double>(rdev);
  Deliver(r);
}

void ll_mkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  Request* r = Make(OP_MKDIR, req, parent);
  setName(r->s1, r->s1Set, r->s1Bad, name);
  r->a = mode;
  Deliver(r);
}

void ll_unlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  Request* r = Make(OP_UNLINK, req, parent);
  setName(r->s1, r->s1Set, r->s1Bad, name);
  Deliver(r);
}

void ll_rmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  Request* r = Make(OP_RMDIR, req, parent);
  setName(r->s1, r->s1Set, r->s1Bad, name);
  Deliver(r);
}

void ll_symlink(fuse_req_t req, const char* link, fuse_ino_t parent, const char* name) {
  Request* r = Make(OP_SYMLINK, req, parent);
  setName(r->s1, r->s1Set, r->s1Bad, name);
  setName(r->s2, r->s2Set, r->s2Bad, link);
  Deliver(r);
}

void ll_rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent, const char* newname, unsigned int flags) {
  Request* r = Make(OP_RENAME, req, parent);
  setName(r->s1, r->s1Set, r->s1Bad, name);
  setName(r->s2, r->s2Set, r->s2Bad, newname);
  r->a = static_cast<double>(newparent);
  r->b = flags;
  Deliver(r);
}

void ll_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char* newname) {
  Request* r = Make(OP_LINK, req, ino);
  setName(r->s1, r->s1Set, r->s1Bad, newname);
  r->a = static_cast<double>(newparent);
  Deliver(r);
}

void ll_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  Request* r = Make(OP_OPEN, req, ino);
  r->a = fi->flags;
  Deliver(r);
}

// A read of `size` bytes at `off` of a file or listing (read, readdir, readdirplus): a = fh, b = size, c = off.
void DeliverSized(int op, fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info* fi) {
  Request* r = Make(op, req, ino);
  r->a = fhOf(fi);
  r->b = static_cast<double>(size);
  r->c = static_cast<double>(off);
  Deliver(r);
}

void ll_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info* fi) {
  DeliverSized(OP_READ, req, ino, size, off, fi);
}

void ll_write(fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, off_t off, struct fuse_file_info* fi) {
  Request* r = Make(OP_WRITE, req, ino);
  r->a = fhOf(fi);
  r->c = static_cast<double>(off);
  r->data = buf;  // libfuse reuses its buffer once this returns: CallJs copies it into a JS Buffer
  r->dataLen = size;
  r->hasData = true;
  Deliver(r);
}

void ll_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  Request* r = Make(OP_FLUSH, req, ino);
  r->a = fhOf(fi);
  Deliver(r);
}

void ll_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  Request* r = Make(OP_RELEASE, req, ino);
  r->a = fhOf(fi);
  Deliver(r);
}

void ll_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info* fi) {
  Request* r = Make(OP_FSYNC, req, ino);
  r->a = fhOf(fi);
  r->b = datasync;
  Deliver(r);
}

void ll_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info* fi) {
  DeliverSized(OP_READDIR, req, ino, size, off, fi);
}

void ll_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info* fi) {
  DeliverSized(OP_READDIRPLUS, req, ino, size, off, fi);
}

// Directories need no handle: ENOSYS makes the kernel stop sending opendir/releasedir at all.
void ll_opendir(fuse_req_t req, fuse_ino_t, struct fuse_file_info*) { fuse_reply_err(req, ENOSYS); }

void ll_statfs(fuse_req_t req, fuse_ino_t ino) { Deliver(Make(OP_STATFS, req, ino)); }

void ll_access(fuse_req_t req, fuse_ino_t ino, int mask) {
  Request* r = Make(OP_ACCESS, req, ino);
  r->a = mask;
  Deliver(r);
}

void ll_create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, struct fuse_file_info* fi) {
  Request* r = Make(OP_CREATE, req, parent);
  setName(r->s1, r->s1Set, r->s1Bad, name);
  r->a = mode;
  r->b = fi->flags;
  Deliver(r);
}

// ---------- to JavaScript ----------

void CallJs(Napi::Env env, Napi::Function handler, Request* r) {
  if (env != nullptr && handler != nullptr) {
    Napi::Value undef = env.Undefined();
    auto str = [&](const std::string& s, bool set, bool bad) -> Napi::Value {
      if (!set) return undef;
      if (bad) return env.Null();
      return Napi::String::New(env, s);
    };
    Napi::Value extra = undef;
    if (r->hasData) {
      // A copy owned by V8 (no finalizer to run: cheaper to collect than external memory).
      extra = Napi::Buffer<char>::Copy(env, r->data, r->dataLen);
    } else if (r->hasAttr) {
      Napi::Object o = Napi::Object::New(env);
      o.Set("valid", r->toSet);
      o.Set("mode", static_cast<double>(r->attr.st_mode));
      o.Set("uid", static_cast<double>(r->attr.st_uid));
      o.Set("gid", static_cast<double>(r->attr.st_gid));
      o.Set("size", static_cast<double>(r->attr.st_size));
      o.Set("atime", Napi::BigInt::New(env, timeNs(r->attr.st_atim)));
      o.Set("mtime", Napi::BigInt::New(env, timeNs(r->attr.st_mtim)));
      extra = o;
    }
    handler.Call({Napi::Number::New(env, r->op), Napi::Number::New(env, static_cast<double>(reinterpret_cast<uintptr_t>(r->req))),
                  Napi::Number::New(env, r->ino), Napi::Number::New(env, r->a), Napi::Number::New(env, r->b), Napi::Number::New(env, r->c),
                  str(r->s1, r->s1Set, r->s1Bad), str(r->s2, r->s2Set, r->s2Bad), extra, Napi::Number::New(env, r->uid),
                  Napi::Number::New(env, r->gid)});
  } else if (r->req && g) {
    fuse_reply_err(r->req, EIO);
  }
  delete r;
}

void OnPollClosed(uv_handle_t* h) {
  delete reinterpret_cast<uv_poll_t*>(h);
  if (!g) return;
  g->ended = true;
  Napi::Env env(g->env);
  Napi::HandleScope hs(env);
  Napi::CallbackScope cs(env, g->async);
  Request* r = new Request();
  r->op = OP_ENDED;
  Deliver(r);
}

// The session ended (the kernel dropped the connection, or unmount()): stop reading, and report
// OP_ENDED once libuv has let go of the descriptor.
void StopPolling() {
  if (!g || !g->poll) return;
  uv_poll_stop(g->poll);
  uv_close(reinterpret_cast<uv_handle_t*>(g->poll), OnPollClosed);
  g->poll = nullptr;
}

// /dev/fuse is readable: read and process every request waiting (each reaches JavaScript through
// Deliver), then let microtasks run once when the callback scope closes.
void OnReadable(uv_poll_t*, int status, int) {
  if (!g || !g->poll) return;
  Napi::Env env(g->env);
  Napi::HandleScope hs(env);
  Napi::CallbackScope cs(env, g->async);
  bool end = status != 0;
  // Bounded, so that replies and timers get their turn under a flood of requests (libuv's poll is
  // level-triggered: what is left is read on the next turn).
  for (int i = 0; i < 256 && !end; i++) {
    int res = fuse_session_receive_buf(g->se, &g->buf);
    if (res == -EINTR) continue;
    if (res == -EAGAIN) return;
    // 0: the kernel ended the session (ENODEV); < 0: the descriptor failed, as fuse_session_loop ends.
    if (res <= 0) end = true;
    else fuse_session_process_buf(g->se, &g->buf);
    if (fuse_session_exited(g->se)) end = true;
  }
  if (end) StopPolling();
}

void NotifierMain() {
  for (;;) {
    Notice n;
    {
      std::unique_lock<std::mutex> lock(g->mu);
      g->cv.wait(lock, [] { return g->stopping || !g->notices.empty(); });
      if (g->notices.empty()) return;
      n = std::move(g->notices.front());
      g->notices.pop_front();
    }
    // Errors (ENOENT: the kernel already forgot that inode or entry) need no answer.
    if (n.kind == 0) fuse_lowlevel_notify_inval_inode(g->se, n.ino, n.off, n.len);
    else if (n.kind == 1) fuse_lowlevel_notify_inval_entry(g->se, n.ino, n.name.c_str(), n.name.size());
    else fuse_lowlevel_notify_delete(g->se, n.ino, n.child, n.name.c_str(), n.name.size());
  }
}

fuse_req_t ReqArg(const Napi::CallbackInfo& info) {
  return reinterpret_cast<fuse_req_t>(static_cast<uintptr_t>(info[0].As<Napi::Number>().Int64Value()));
}

// After destroy() the session and its requests are gone: a late reply must not touch them.
#define REQUIRE_SESSION(info) \
  if (!g) return Napi::Number::New((info).Env(), -ENOTCONN)

double Num(const Napi::Object& o, const char* key) {
  Napi::Value v = o.Get(key);
  return v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : 0;
}

void TimeOfMs(struct timespec& t, double ms) {
  double s = ms / 1000.0;
  t.tv_sec = static_cast<time_t>(s);
  if (static_cast<double>(t.tv_sec) > s) t.tv_sec--;
  t.tv_nsec = static_cast<long>((ms - static_cast<double>(t.tv_sec) * 1000.0) * 1e6);
  if (t.tv_nsec >= 1000000000L) t.tv_nsec = 999999999L;
  if (t.tv_nsec < 0) t.tv_nsec = 0;
}

// `ns` (a BigInt of nanoseconds) when the object has it, else `ms` (a Number of milliseconds).
void TimeOf(struct timespec& t, const Napi::Object& o, const char* ns, const char* ms) {
  Napi::Value v = o.Get(ns);
  if (v.IsBigInt()) {
    bool lossless = true;
    int64_t n = v.As<Napi::BigInt>().Int64Value(&lossless);
    t.tv_sec = static_cast<time_t>(n / 1000000000LL);
    t.tv_nsec = static_cast<long>(n % 1000000000LL);
    if (t.tv_nsec < 0) {
      t.tv_sec--;
      t.tv_nsec += 1000000000L;
    }
    return;
  }
  TimeOfMs(t, Num(o, ms));
}

// A FuseStat (fuse/fuse-types.ts) as struct stat. st_ino is its `ino` when set, else `ino` (the FUSE
// node id, which stays in the request's nodeid either way).
void StatOf(struct stat& st, const Napi::Object& o, double ino) {
  memset(&st, 0, sizeof st);
  double own = Num(o, "ino");
  st.st_ino = static_cast<ino_t>(own > 0 ? own : ino);
  st.st_mode = static_cast<mode_t>(Num(o, "mode"));
  st.st_uid = static_cast<uid_t>(Num(o, "uid"));
  st.st_gid = static_cast<gid_t>(Num(o, "gid"));
  st.st_size = static_cast<off_t>(Num(o, "size"));
  st.st_nlink = static_cast<nlink_t>(Num(o, "nlink"));
  st.st_blksize = static_cast<blksize_t>(Num(o, "blksize"));
  st.st_blocks = static_cast<blkcnt_t>(Num(o, "blocks"));
  TimeOf(st.st_atim, o, "atimeNs", "atime");
  TimeOf(st.st_mtim, o, "mtimeNs", "mtime");
  TimeOf(st.st_ctim, o, "ctimeNs", "ctime");
}

// entry: {ino, attr, entryTimeout, attrTimeout}; ino 0 is a negative entry.
void EntryOf(struct fuse_entry_param& e, const Napi::Object& o) {
  memset(&e, 0, sizeof e);
  e.ino = static_cast<fuse_ino_t>(Num(o, "ino"));
  e.generation = static_cast<uint64_t>(Num(o, "generation"));
  e.entry_timeout = Num(o, "entryTimeout");
  e.attr_timeout = Num(o, "attrTimeout");
  Napi::Value attr = o.Get("attr");
  if (attr.IsObject()) StatOf(e.attr, attr.As<Napi::Object>(), static_cast<double>(e.ino));
  else e.attr.st_ino = e.ino;
}

void FileInfoOf(struct fuse_file_info& fi, double fh, uint32_t flags) {
  memset(&fi, 0, sizeof fi);
  fi.fh = static_cast<uint64_t>(fh);
  fi.direct_io = (flags & 1) != 0;
  fi.keep_cache = (flags & 2) != 0;
  fi.noflush = (flags & 4) != 0;
  fi.cache_readdir = (flags & 8) != 0;
}

Napi::Value Result(Napi::Env env, int rc) { return Napi::Number::New(env, rc); }

// ---------- from JavaScript ----------

// create(mountpoint, args: string[], capsWant, capsUnwant, handler)
Napi::Value Create(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (g) throw Napi::Error::New(env, "a FUSE session already exists in this process");
  std::string mnt = info[0].As<Napi::String>();
  Napi::Array arr = info[1].As<Napi::Array>();
  std::vector<std::string> args{"mdvfs"};
  for (uint32_t i = 0; i < arr.Length(); i++) args.push_back(arr.Get(i).As<Napi::String>());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  struct fuse_args fargs = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());

  static struct fuse_lowlevel_ops ops;
  memset(&ops, 0, sizeof ops);
  ops.init = ll_init;
  ops.lookup = ll_lookup;
  ops.forget = ll_forget;
  ops.forget_multi = ll_forget_multi;
  ops.getattr = ll_getattr;
  ops.setattr = ll_setattr;
  ops.readlink = ll_readlink;
  ops.mknod = ll_mknod;
  ops.mkdir = ll_mkdir;
  ops.unlink = ll_unlink;
  ops.rmdir = ll_rmdir;
  ops.symlink = ll_symlink;
  ops.rename = ll_rename;
  ops.link = ll_link;
  ops.open = ll_open;
  ops.read = ll_read;
  ops.write = ll_write;
  ops.flush = ll_flush;
  ops.release = ll_release;
  ops.fsync = ll_fsync;
  ops.readdir = ll_readdir;
  ops.readdirplus = ll_readdirplus;
  ops.opendir = ll_opendir;
  ops.statfs = ll_statfs;
  ops.access = ll_access;
  ops.create = ll_create;

  g = new Session();
  g->capsWant = static_cast<uint64_t>(info[2].As<Napi::Number>().Int64Value());
  g->capsUnwant = static_cast<uint64_t>(info[3].As<Napi::Number>().Int64Value());
  g->se = fuse_session_new(&fargs, &ops, sizeof ops, nullptr);
  if (!g->se) {
    delete g;
    g = nullptr;
    throw Napi::Error::New(env, "fuse_session_new failed (bad options?)");
  }
  if (fuse_session_mount(g->se, mnt.c_str()) != 0) {
    fuse_session_destroy(g->se);
    delete g;
    g = nullptr;
    throw Napi::Error::New(env, "cannot mount at " + mnt + " (see the message above)");
  }
  g->mounted = true;
  g->env = env;
  g->handler = Napi::Persistent(info[4].As<Napi::Function>());
  uv_loop_t* loop = nullptr;
  int fd = fuse_session_fd(g->se);
  if (napi_async_init(env, nullptr, Napi::String::New(env, "mdvfs-fuse"), &g->async) != napi_ok ||
      napi_get_uv_event_loop(env, &loop) != napi_ok || fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) {
    fuse_session_unmount(g->se);
    fuse_session_destroy(g->se);
    delete g;
    g = nullptr;
    throw Napi::Error::New(env, "cannot poll the FUSE session from the event loop");
  }
  g->notifier = std::thread(NotifierMain);
  g->poll = new uv_poll_t;
  uv_poll_init(loop, g->poll, fd);
  uv_poll_start(g->poll, UV_READABLE, OnReadable);
  return env.Undefined();
}

// unmount(): ends the session (idempotent): stops reading requests (OP_ENDED follows on a later turn
// of the event loop) and detaches the mount. Nothing here waits for the notifier thread: it may be
// waiting on the kernel, which may be waiting on this very thread; destroy() joins it.
Napi::Value Unmount(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!g || !g->mounted) return env.Undefined();
  g->mounted = false;
  fuse_session_exit(g->se);
  {
    std::lock_guard<std::mutex> lock(g->mu);
    g->stopping = true;
  }
  g->cv.notify_all();
  StopPolling();                // before the descriptor is closed: libuv must not watch a closed one
  fuse_session_unmount(g->se);  // closes the descriptor, then a lazy unmount
  return env.Undefined();
}

// destroy(): once OP_ENDED was reported, joins the notifier thread and frees the session, so that the
// process exits with no thread of the addon running. Returns false, doing nothing, while requests
// are still read. Replies after it are refused (the requests are gone with it).
Napi::Value Destroy(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!g) return Napi::Boolean::New(env, true);
  if (!g->ended) return Napi::Boolean::New(env, false);
  {
    std::lock_guard<std::mutex> lock(g->mu);
    g->stopping = true;
    g->mounted = false;
  }
  g->cv.notify_all();
  if (g->notifier.joinable()) g->notifier.join();
  fuse_session_destroy(g->se);
  free(g->buf.mem);
  g->handler.Reset();
  napi_async_destroy(env, g->async);
  delete g;
  g = nullptr;
  return Napi::Boolean::New(env, true);
}

Napi::Value ReplyErr(const Napi::CallbackInfo& info) {
  REQUIRE_SESSION(info);
  return Result(info.Env(), fuse_reply_err(ReqArg(info), info[1].As<Napi::Number>().Int32Value()));
}

Napi::Value ReplyNone(const Napi::CallbackInfo& info) {
  if (!g) return info.Env().Undefined();
  fuse_reply_none(ReqArg(info));
  return info.Env().Undefined();
}

Napi::Value ReplyEntry(const Napi::CallbackInfo& info) {
  REQUIRE_SESSION(info);
  struct fuse_entry_param e;
  EntryOf(e, info[1].As<Napi::Object>());
  return Result(info.Env(), fuse_reply_entry(ReqArg(info), &e));
}

// replyCreate(req, entry, fh, openFlags)
Napi::Value ReplyCreate(const Napi::CallbackInfo& info) {
  REQUIRE_SESSION(info);
  struct fuse_entry_param e;
  EntryOf(e, info[1].As<Napi::Object>());
  struct fuse_file_info fi;
  FileInfoOf(fi, info[2].As<Napi::Number>().DoubleValue(), info[3].As<Napi::Number>().Uint32Value());
  return Result(info.Env(), fuse_reply_create(ReqArg(info), &e, &fi));
}

// replyAttr(req, ino, attr, timeout)
Napi::Value ReplyAttr(const Napi::CallbackInfo& info) {
  REQUIRE_SESSION(info);
  struct stat st;
  StatOf(st, info[2].As<Napi::Object>(), info[1].As<Napi::Number>().DoubleValue());
  return Result(info.Env(), fuse_reply_attr(ReqArg(info), &st, info[3].As<Napi::Number>().DoubleValue()));
}

// replyOpen(req, fh, openFlags)
Napi::Value ReplyOpen(const Napi::CallbackInfo& info) {
  REQUIRE_SESSION(info);
  struct fuse_file_info fi;
  FileInfoOf(fi, info[1].As<Napi::Number>().DoubleValue(), info[2].As<Napi::Number>().Uint32Value());
  return Result(info.Env(), fuse_reply_open(ReqArg(info), &fi));
}

// replyBuf(req, buffer, length)
Napi::Value ReplyBuf(const Napi::CallbackInfo& info) {
  REQUIRE_SESSION(info);
  Napi::Buffer<char> b = info[1].As<Napi::Buffer<char>>();
  size_t len = info[2].As<Napi::Number>().Uint32Value();
  if (len > b.Length()) len = b.Length();
  return Result(info.Env(), fuse_reply_buf(ReqArg(info), b.Data(), len));
}

Napi::Value ReplyWrite(const Napi::CallbackInfo& info) {
  REQUIRE_SESSION(info);
  return Result(info.Env(), fuse_reply_write(ReqArg(info), info[1].As<Napi::Number>().Uint32Value()));
}

Napi::Value ReplyReadlink(const Napi::CallbackInfo& info) {
  REQUIRE_SESSION(info);
  std::string target = info[1].As<Napi::String>();
  return Result(info.Env(), fuse_reply_readlink(ReqArg(info), target.c_str()));
}

Napi::Value ReplyStatfs(const Napi::CallbackInfo& info) {
  REQUIRE_SESSION(info);
  Napi::Object o = info[1].As<Napi::Object>();
  struct statvfs s;
  memset(&s, 0, sizeof s);
  s.f_bsize = static_cast<unsigned long>(Num(o, "bsize"));
  s.f_frsize = static_cast<unsigned long>(Num(o, "frsize"));
  s.f_blocks = static_cast<fsblkcnt_t>(Num(o, "blocks"));
  s.f_bfree = static_cast<fsblkcnt_t>(Num(o, "bfree"));
  s.f_bavail = static_cast<fsblkcnt_t>(Num(o, "bavail"));
  s.f_files = static_cast<fsfilcnt_t>(Num(o, "files"));
  s.f_ffree = static_cast<fsfilcnt_t>(Num(o, "ffree"));
  s.f_favail = static_cast<fsfilcnt_t>(Num(o, "favail"));
  s.f_namemax = static_cast<unsigned long>(Num(o, "namemax"));
  return Result(info.Env(), fuse_reply_statfs(ReqArg(info), &s));
}

// The reply of a listing: entries from offset `off` (entry i gets the next offset off+i+1), as many
// as fit in `size` bytes; `add(req, i, name, buf, room, next)` adds entry i and returns the bytes it
// takes (more than `room`: it did not fit). Returns how many were sent, or -1 if the reply failed.
template <typename Add>
Napi::Value ReplyEntries(const Napi::CallbackInfo& info, Add add) {
  REQUIRE_SESSION(info);
  Napi::Env env = info.Env();
  fuse_req_t req = ReqArg(info);
  size_t size = info[1].As<Napi::Number>().Uint32Value();
  double off = info[2].As<Napi::Number>().DoubleValue();
  Napi::Array names = info[3].As<Napi::Array>();
  std::vector<char> buf(size);
  size_t used = 0;
  uint32_t i = 0;
  for (; i < names.Length(); i++) {
    std::string name = names.Get(i).As<Napi::String>();
    size_t need = add(req, i, name.c_str(), buf.data() + used, size - used, static_cast<off_t>(off + i + 1));
    if (need > size - used) break;
    used += need;
  }
  if (fuse_reply_buf(req, buf.data(), used) != 0) return Napi::Number::New(env, -1);
  return Napi::Number::New(env, i);
}

// replyDir(req, size, off, names, inos, modes): each entry with its inode number and type.
Napi::Value ReplyDir(const Napi::CallbackInfo& info) {
  Napi::Array inos = info[4].As<Napi::Array>();
  Napi::Array modes = info[5].As<Napi::Array>();
  return ReplyEntries(info, [&](fuse_req_t req, uint32_t i, const char* name, char* buf, size_t room, off_t next) {
    struct stat st;
    memset(&st, 0, sizeof st);
    st.st_ino = static_cast<ino_t>(inos.Get(i).As<Napi::Number>().DoubleValue());
    st.st_mode = static_cast<mode_t>(modes.Get(i).As<Napi::Number>().Uint32Value());
    return fuse_add_direntry(req, buf, room, name, &st, next);
  });
}

// replyDirPlus(req, size, off, names, entries): each entry with its attributes and a node id (0 for
// `.` and `..`, which take no lookup). Every entry sent with a node id counts one lookup in the kernel.
Napi::Value ReplyDirPlus(const Napi::CallbackInfo& info) {
  Napi::Array entries = info[4].As<Napi::Array>();
  return ReplyEntries(info, [&](fuse_req_t req, uint32_t i, const char* name, char* buf, size_t room, off_t next) {
    struct fuse_entry_param e;
    EntryOf(e, entries.Get(i).As<Napi::Object>());
    return fuse_add_direntry_plus(req, buf, room, name, &e, next);
  });
}

void Queue(Notice n) {
  if (!g || !g->mounted) return;
  {
    std::lock_guard<std::mutex> lock(g->mu);
    g->notices.push_back(std::move(n));
  }
  g->cv.notify_one();
}

// notifyInvalInode(ino, off, len)
Napi::Value NotifyInvalInode(const Napi::CallbackInfo& info) {
  Queue(Notice{0, static_cast<fuse_ino_t>(info[0].As<Napi::Number>().DoubleValue()), 0, info[1].As<Napi::Number>().Int64Value(),
               info[2].As<Napi::Number>().Int64Value(), ""});
  return info.Env().Undefined();
}

// notifyInvalEntry(parent, name)
Napi::Value NotifyInvalEntry(const Napi::CallbackInfo& info) {
  Queue(Notice{1, static_cast<fuse_ino_t>(info[0].As<Napi::Number>().DoubleValue()), 0, 0, 0, info[1].As<Napi::String>()});
  return info.Env().Undefined();
}

// notifyDelete(parent, child, name)
Napi::Value NotifyDelete(const Napi::CallbackInfo& info) {
  Queue(Notice{2, static_cast<fuse_ino_t>(info[0].As<Napi::Number>().DoubleValue()), static_cast<fuse_ino_t>(info[1].As<Napi::Number>().DoubleValue()),
               0, 0, info[2].As<Napi::String>()});
  return info.Env().Undefined();
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("create", Napi::Function::New(env, Create));
  exports.Set("unmount", Napi::Function::New(env, Unmount));
  exports.Set("destroy", Napi::Function::New(env, Destroy));
  exports.Set("replyErr", Napi::Function::New(env, ReplyErr));
  exports.Set("replyNone", Napi::Function::New(env, ReplyNone));
  exports.Set("replyEntry", Napi::Function::New(env, ReplyEntry));
  exports.Set("replyCreate", Napi::Function::New(env, ReplyCreate));
  exports.Set("replyAttr", Napi::Function::New(env, ReplyAttr));
  exports.Set("replyOpen", Napi::Function::New(env, ReplyOpen));
  exports.Set("replyBuf", Napi::Function::New(env, ReplyBuf));
  exports.Set("replyWrite", Napi::Function::New(env, ReplyWrite));
  exports.Set("replyReadlink", Napi::Function::New(env, ReplyReadlink));
  exports.Set("replyStatfs", Napi::Function::New(env, ReplyStatfs));
  exports.Set("replyDir", Napi::Function::New(env, ReplyDir));
  exports.Set("replyDirPlus", Napi::Function::New(env, ReplyDirPlus));
  exports.Set("notifyInvalInode", Napi::Function::New(env, NotifyInvalInode));
  exports.Set("notifyInvalEntry", Napi::Function::New(env, NotifyInvalEntry));
  exports.Set("notifyDelete", Napi::Function::New(env, NotifyDelete));
  Napi::Object caps = Napi::Object::New(env);
  caps.Set("ATOMIC_O_TRUNC", FUSE_CAP_ATOMIC_O_TRUNC);
  caps.Set("WRITEBACK_CACHE", FUSE_CAP_WRITEBACK_CACHE);
  caps.Set("AUTO_INVAL_DATA", FUSE_CAP_AUTO_INVAL_DATA);
  caps.Set("EXPLICIT_INVAL_DATA", FUSE_CAP_EXPLICIT_INVAL_DATA);
  caps.Set("READDIRPLUS", FUSE_CAP_READDIRPLUS);
  caps.Set("READDIRPLUS_AUTO", FUSE_CAP_READDIRPLUS_AUTO);
  caps.Set("NO_OPEN_SUPPORT", FUSE_CAP_NO_OPEN_SUPPORT);
  caps.Set("NO_OPENDIR_SUPPORT", FUSE_CAP_NO_OPENDIR_SUPPORT);
  caps.Set("CACHE_SYMLINKS", FUSE_CAP_CACHE_SYMLINKS);
  caps.Set("PARALLEL_DIROPS", FUSE_CAP_PARALLEL_DIROPS);
  exports.Set("caps", caps);
  return exports;
}

}  // namespace

NODE_API_MODULE(mdvfs_fuse, Init)
