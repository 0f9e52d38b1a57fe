// Dear ImGui renderer for OpenGL 3.3 core with a texture-free path (gl_renderer.hpp).
//
// Index: [SECTION] Entry points, [SECTION] Shaders, [SECTION] GlRenderer
#include "gui/gl_renderer.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <GL/gl.h>
#include <GL/glext.h>
#include <imgui.h>

namespace csim::gui {

// [SECTION] Entry points
// ---------------------------------------------------------------------------

// Everything newer than OpenGL 1.1, loaded through the window library so that no GL loader
// library is needed (OpenGL 1.1 comes from libGL itself).
struct GlRenderer::Api {
  PFNGLACTIVETEXTUREPROC active_texture = nullptr;
  PFNGLBLENDEQUATIONPROC blend_equation = nullptr;
  PFNGLBLENDFUNCSEPARATEPROC blend_func_separate = nullptr;
  PFNGLCREATESHADERPROC create_shader = nullptr;
  PFNGLSHADERSOURCEPROC shader_source = nullptr;
  PFNGLCOMPILESHADERPROC compile_shader = nullptr;
  PFNGLGETSHADERIVPROC get_shader_iv = nullptr;
  PFNGLGETSHADERINFOLOGPROC get_shader_info_log = nullptr;
  PFNGLDELETESHADERPROC delete_shader = nullptr;
  PFNGLCREATEPROGRAMPROC create_program = nullptr;
  PFNGLATTACHSHADERPROC attach_shader = nullptr;
  PFNGLLINKPROGRAMPROC link_program = nullptr;
  PFNGLGETPROGRAMIVPROC get_program_iv = nullptr;
  PFNGLGETPROGRAMINFOLOGPROC get_program_info_log = nullptr;
  PFNGLDELETEPROGRAMPROC delete_program = nullptr;
  PFNGLUSEPROGRAMPROC use_program = nullptr;
  PFNGLGETUNIFORMLOCATIONPROC get_uniform_location = nullptr;
  PFNGLUNIFORM1IPROC uniform1i = nullptr;
  PFNGLUNIFORMMATRIX4FVPROC uniform_matrix4fv = nullptr;
  PFNGLGENVERTEXARRAYSPROC gen_vertex_arrays = nullptr;
  PFNGLBINDVERTEXARRAYPROC bind_vertex_array = nullptr;
  PFNGLDELETEVERTEXARRAYSPROC delete_vertex_arrays = nullptr;
  PFNGLGENBUFFERSPROC gen_buffers = nullptr;
  PFNGLBINDBUFFERPROC bind_buffer = nullptr;
  PFNGLBUFFERDATAPROC buffer_data = nullptr;
  PFNGLDELETEBUFFERSPROC delete_buffers = nullptr;
  PFNGLENABLEVERTEXATTRIBARRAYPROC enable_vertex_attrib_array = nullptr;
  PFNGLVERTEXATTRIBPOINTERPROC vertex_attrib_pointer = nullptr;
  PFNGLDRAWELEMENTSBASEVERTEXPROC draw_elements_base_vertex = nullptr;

  bool load(GlLoader get) {
    bool ok = true;
    auto one = [&](auto* fn, const char* name) {
      *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(get(name));
      ok = ok && *fn != nullptr;
    };
    one(&active_texture, "glActiveTexture");
    one(&blend_equation, "glBlendEquation");
    one(&blend_func_separate, "glBlendFuncSeparate");
    one(&create_shader, "glCreateShader");
    one(&shader_source, "glShaderSource");
    one(&compile_shader, "glCompileShader");
    one(&get_shader_iv, "glGetShaderiv");
    one(&get_shader_info_log, "glGetShaderInfoLog");
    one(&delete_shader, "glDeleteShader");
    one(&create_program, "glCreateProgram");
    one(&attach_shader, "glAttachShader");
    one(&link_program, "glLinkProgram");
    one(&get_program_iv, "glGetProgramiv");
    one(&get_program_info_log, "glGetProgramInfoLog");
    one(&delete_program, "glDeleteProgram");
    one(&use_program, "glUseProgram");
    one(&get_uniform_location, "glGetUniformLocation");
    one(&uniform1i, "glUniform1i");
    one(&uniform_matrix4fv, "glUniformMatrix4fv");
    one(&gen_vertex_arrays, "glGenVertexArrays");
    one(&bind_vertex_array, "glBindVertexArray");
    one(&delete_vertex_arrays, "glDeleteVertexArrays");
    one(&gen_buffers, "glGenBuffers");
    one(&bind_buffer, "glBindBuffer");
    one(&buffer_data, "glBufferData");
    one(&delete_buffers, "glDeleteBuffers");
    one(&enable_vertex_attrib_array, "glEnableVertexAttribArray");
    one(&vertex_attrib_pointer, "glVertexAttribPointer");
    one(&draw_elements_base_vertex, "glDrawElementsBaseVertex");
    return ok;
  }
};

namespace {

// [SECTION] Shaders
// --------------------------------------------------------------------------------

// The vertex stage is Dear ImGui's (orthographic projection of ImDrawVert), so both programs
// rasterise a triangle to the same pixels.
constexpr const char* kVertexShader = R"(#version 330 core
layout (location = 0) in vec2 in_pos;
layout (location = 1) in vec2 in_uv;
layout (location = 2) in vec4 in_col;
uniform mat4 proj;
out vec2 frag_uv;
out vec4 frag_col;
void main() {
  frag_uv = in_uv;
  frag_col = in_col;
  gl_Position = proj * vec4(in_pos.xy, 0, 1);
}
)";

constexpr const char* kTexturedFragmentShader = R"(#version 330 core
in vec2 frag_uv;
in vec4 frag_col;
uniform sampler2D tex;
layout (location = 0) out vec4 out_col;
void main() { out_col = frag_col * texture(tex, frag_uv.st); }
)";

constexpr const char* kSolidFragmentShader = R"(#version 330 core
in vec2 frag_uv;
in vec4 frag_col;
layout (location = 0) out vec4 out_col;
void main() { out_col = frag_col; }
)";

unsigned compile(const GlRenderer::Api& gl, GLenum stage, const char* source, const char* what,
                 std::string* error) {
  const GLuint s = gl.create_shader(stage);
  gl.shader_source(s, 1, &source, nullptr);
  gl.compile_shader(s);
  GLint ok = 0;
  gl.get_shader_iv(s, GL_COMPILE_STATUS, &ok);
  if (ok == GL_FALSE) {
    char log[1024] = {};
    gl.get_shader_info_log(s, sizeof log, nullptr, log);
    *error = std::string("cannot compile the ") + what + " shader: " + log;
    gl.delete_shader(s);
    return 0;
  }
  return s;
}

unsigned link(const GlRenderer::Api& gl, const char* fragment, const char* what,
              std::string* error) {
  const GLuint vs = compile(gl, GL_VERTEX_SHADER, kVertexShader, "vertex", error);
  if (vs == 0) return 0;
  const GLuint fs = compile(gl, GL_FRAGMENT_SHADER, fragment, what, error);
  if (fs == 0) {
    gl.delete_shader(vs);
    return 0;
  }
  const GLuint p = gl.create_program();
  gl.attach_shader(p, vs);
  gl.attach_shader(p, fs);
  gl.link_program(p);
  gl.delete_shader(vs);  // flagged for deletion; freed with the program
  gl.delete_shader(fs);
  GLint ok = 0;
  gl.get_program_iv(p, GL_LINK_STATUS, &ok);
  if (ok == GL_FALSE) {
    char log[1024] = {};
    gl.get_program_info_log(p, sizeof log, nullptr, log);
    *error = std::string("cannot link the ") + what + " program: " + log;
    gl.delete_program(p);
    return 0;
  }
  return p;
}

// Regrouping. A triangle may move to an earlier group when its bounding box, grown by this margin
// (px), meets none of the groups it jumps over: such triangles share no pixel, so their order
// does not matter. The margin covers the rasteriser's snapping of vertices to its sub-pixel grid.
constexpr float kMarginPx = 1.0f;
// How many groups a triangle may jump over (the test is against each group's bounding box).
constexpr std::size_t kMaxJump = 16;

}  // namespace

// [SECTION] GlRenderer
// -----------------------------------------------------------------------------

GlRenderer::GlRenderer() = default;  // here, where Api is complete

GlRenderer::~GlRenderer() {
  shutdown();
}

bool GlRenderer::init(GlLoader loader, std::string* error) {
  api_ = std::make_unique<Api>();
  if (!api_->load(loader)) {
    *error = "the OpenGL context lacks OpenGL 3.3 entry points";
    return false;
  }
  const Api& gl = *api_;
  solid_program_ = link(gl, kSolidFragmentShader, "solid", error);
  if (solid_program_ == 0) return false;
  textured_program_ = link(gl, kTexturedFragmentShader, "textured", error);
  if (textured_program_ == 0) return false;
  solid_proj_ = gl.get_uniform_location(solid_program_, "proj");
  textured_proj_ = gl.get_uniform_location(textured_program_, "proj");
  textured_tex_ = gl.get_uniform_location(textured_program_, "tex");

  gl.gen_vertex_arrays(1, &vao_);
  gl.gen_buffers(1, &vbo_);
  gl.gen_buffers(1, &ibo_);
  gl.bind_vertex_array(vao_);
  gl.bind_buffer(GL_ARRAY_BUFFER, vbo_);
  gl.bind_buffer(GL_ELEMENT_ARRAY_BUFFER, ibo_);  // part of the VAO's state
  gl.enable_vertex_attrib_array(0);
  gl.enable_vertex_attrib_array(1);
  gl.enable_vertex_attrib_array(2);
  const auto at = [](std::size_t offset) { return reinterpret_cast<const void*>(offset); };
  gl.vertex_attrib_pointer(0, 2, GL_FLOAT, GL_FALSE, sizeof(ImDrawVert),
                           at(offsetof(ImDrawVert, pos)));
  gl.vertex_attrib_pointer(1, 2, GL_FLOAT, GL_FALSE, sizeof(ImDrawVert),
                           at(offsetof(ImDrawVert, uv)));
  gl.vertex_attrib_pointer(2, 4, GL_UNSIGNED_BYTE, GL_TRUE, sizeof(ImDrawVert),
                           at(offsetof(ImDrawVert, col)));
  gl.bind_vertex_array(0);

  // The font atlas as RGBA with bilinear filtering, as the stock backend uploads it: glyphs are
  // oversampled horizontally, so text quads minify the atlas and nearest sampling would change
  // how text looks.
  ImGuiIO& io = ImGui::GetIO();
  unsigned char* pixels = nullptr;
  int w = 0, h = 0;
  io.Fonts->GetTexDataAsRGBA32(&pixels, &w, &h);
  glGenTextures(1, &font_texture_);
  glBindTexture(GL_TEXTURE_2D, font_texture_);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_LINEAR);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_LINEAR);
  glPixelStorei(GL_UNPACK_ROW_LENGTH, 0);
  glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA, w, h, 0, GL_RGBA, GL_UNSIGNED_BYTE, pixels);
  io.Fonts->SetTexID(reinterpret_cast<ImTextureID>(static_cast<std::intptr_t>(font_texture_)));

  io.BackendRendererName = "csim_gl33";
  io.BackendFlags |= ImGuiBackendFlags_RendererHasVtxOffset;  // glDrawElementsBaseVertex
  return true;
}

void GlRenderer::shutdown() {
  if (api_ == nullptr) return;
  const Api& gl = *api_;
  if (font_texture_ != 0) {
    glDeleteTextures(1, &font_texture_);
    if (ImGui::GetCurrentContext() != nullptr) {
      ImGuiIO& io = ImGui::GetIO();
      io.Fonts->SetTexID(nullptr);
      io.BackendRendererName = nullptr;
      io.BackendFlags &= ~ImGuiBackendFlags_RendererHasVtxOffset;
    }
  }
  if (vao_ != 0) gl.delete_vertex_arrays(1, &vao_);
  if (vbo_ != 0) gl.delete_buffers(1, &vbo_);
  if (ibo_ != 0) gl.delete_buffers(1, &ibo_);
  if (solid_program_ != 0) gl.delete_program(solid_program_);
  if (textured_program_ != 0) gl.delete_program(textured_program_);
  font_texture_ = vao_ = vbo_ = ibo_ = solid_program_ = textured_program_ = 0;
  api_.reset();
}

void GlRenderer::setup_state(const ImDrawData* draw_data, int fb_width, int fb_height) {
  const Api& gl = *api_;
  gl.blend_equation(GL_FUNC_ADD);
  gl.blend_func_separate(GL_SRC_ALPHA, GL_ONE_MINUS_SRC_ALPHA, GL_ONE, GL_ONE_MINUS_SRC_ALPHA);
  glDisable(GL_CULL_FACE);
  glDisable(GL_DEPTH_TEST);
  glDisable(GL_STENCIL_TEST);
  glEnable(GL_SCISSOR_TEST);
  glViewport(0, 0, fb_width, fb_height);
  // Dear ImGui's projection: DisplayPos at the top left, y down.
  const float l = draw_data->DisplayPos.x;
  const float r = draw_data->DisplayPos.x + draw_data->DisplaySize.x;
  const float t = draw_data->DisplayPos.y;
  const float b = draw_data->DisplayPos.y + draw_data->DisplaySize.y;
  const float proj[4][4] = {
      {2.0f / (r - l), 0.0f, 0.0f, 0.0f},
      {0.0f, 2.0f / (t - b), 0.0f, 0.0f},
      {0.0f, 0.0f, -1.0f, 0.0f},
      {(r + l) / (l - r), (t + b) / (b - t), 0.0f, 1.0f},
  };
  gl.use_program(solid_program_);
  gl.uniform_matrix4fv(solid_proj_, 1, GL_FALSE, &proj[0][0]);
  gl.use_program(textured_program_);
  gl.uniform_matrix4fv(textured_proj_, 1, GL_FALSE, &proj[0][0]);
  gl.uniform1i(textured_tex_, 0);
  gl.active_texture(GL_TEXTURE0);
  gl.bind_vertex_array(vao_);
  gl.bind_buffer(GL_ARRAY_BUFFER, vbo_);
  current_ = kNone;
}

void GlRenderer::use(Pipeline p) {
  if (p == current_) return;
  const Api& gl = *api_;
  if (p == kOpaque) {
    glDisable(GL_BLEND);
  } else if (current_ == kOpaque || current_ == kNone) {
    glEnable(GL_BLEND);
  }
  const bool textured = p == kTextured;
  if (current_ == kNone || textured != (current_ == kTextured))
    gl.use_program(textured ? textured_program_ : solid_program_);
  current_ = p;
  ++stats_.state_changes;
}

namespace {

template <typename Idx>
std::vector<Idx>& scratch(std::vector<unsigned short>& i16, std::vector<unsigned>& i32) {
  if constexpr (sizeof(Idx) == 2) {
    return i16;
  } else {
    return i32;
  }
}

}  // namespace

// Splits command `cmd` of `list` into groups of one pipeline each (gl_renderer.hpp), writes its
// indices group by group into the regrouped index buffer and appends one batch per group.
//
// Each triangle goes to the last group of its pipeline, provided it overlaps none of the later
// groups (it would move in front of them); otherwise it opens a new group. Example:
// a row of event rectangles (opaque), each followed by its label (textured): rectangle 1 opens
// group A, label 1 opens group B; rectangle 2 joins A (it does not meet label 1), label 2 joins
// B, and so on: two draw calls for the row instead of two per event.
void GlRenderer::regroup(const ImDrawList& list, int cmd_index, float white_u, float white_v) {
  const ImDrawCmd& cmd = list.CmdBuffer[cmd_index];
  const ImDrawVert* vtx = list.VtxBuffer.Data + cmd.VtxOffset;
  const ImDrawIdx* idx = list.IdxBuffer.Data + cmd.IdxOffset;
  std::vector<ImDrawIdx>& out = scratch<ImDrawIdx>(indices16_, indices32_);
  const unsigned tris = cmd.ElemCount / 3;
  const bool font = cmd.GetTexID() == ImGui::GetIO().Fonts->TexID;
  if (!font) {  // a user texture: draw as given
    std::copy_n(idx, cmd.ElemCount, out.data() + cmd.IdxOffset);
    batches_.push_back(Batch{cmd_index, kTextured, cmd.IdxOffset, cmd.ElemCount});
    stats_.textured_triangles += tris;
    return;
  }
  groups_.clear();
  group_of_.resize(tris);
  int last_of[3] = {-1, -1, -1};  // last group of each pipeline
  for (unsigned t = 0; t < tris; ++t) {
    const ImDrawVert& a = vtx[idx[3 * t]];
    const ImDrawVert& b = vtx[idx[3 * t + 1]];
    const ImDrawVert& c = vtx[idx[3 * t + 2]];
    // Dear ImGui writes the atlas' TexUvWhitePixel verbatim into every vertex of a solid shape,
    // so the float comparison is exact.
    auto white = [&](const ImDrawVert& v) { return v.uv.x == white_u && v.uv.y == white_v; };
    constexpr ImU32 kA = IM_COL32_A_MASK;
    Pipeline kind = kTextured;
    if (white(a) && white(b) && white(c)) {
      kind = (a.col & kA) == kA && (b.col & kA) == kA && (c.col & kA) == kA ? kOpaque : kSolid;
    }
    const float x0 = std::min({a.pos.x, b.pos.x, c.pos.x}) - kMarginPx;
    const float y0 = std::min({a.pos.y, b.pos.y, c.pos.y}) - kMarginPx;
    const float x1 = std::max({a.pos.x, b.pos.x, c.pos.x}) + kMarginPx;
    const float y1 = std::max({a.pos.y, b.pos.y, c.pos.y}) + kMarginPx;
    int into = last_of[kind];
    if (into >= 0 && groups_.size() - static_cast<std::size_t>(into) - 1 > kMaxJump) into = -1;
    for (std::size_t h = static_cast<std::size_t>(into) + 1; into >= 0 && h < groups_.size(); ++h) {
      const Group& o = groups_[h];
      if (!(x1 <= o.x0 || o.x1 <= x0 || y1 <= o.y0 || o.y1 <= y0)) into = -1;  // they overlap
    }
    if (into < 0) {
      groups_.push_back(Group{kind, x0, y0, x1, y1, 0, 0});
      into = static_cast<int>(groups_.size()) - 1;
      last_of[kind] = into;
    } else {
      Group& g = groups_[into];
      g.x0 = std::min(g.x0, x0);
      g.y0 = std::min(g.y0, y0);
      g.x1 = std::max(g.x1, x1);
      g.y1 = std::max(g.y1, y1);
    }
    ++groups_[into].triangles;
    groups_[into].area += 0.5 * std::fabs((b.pos.x - a.pos.x) * (c.pos.y - a.pos.y) -
                                          (c.pos.x - a.pos.x) * (b.pos.y - a.pos.y));
    group_of_[t] = static_cast<unsigned>(into);
  }
  // Counting sort of the triangles by group, stable: each group keeps its triangles' order.
  unsigned first = cmd.IdxOffset;
  for (Group& g : groups_) {
    const unsigned n = g.triangles;
    if (!batches_.empty() && batches_.back().cmd == cmd_index &&
        batches_.back().pipeline == g.pipeline) {
      batches_.back().count += 3 * n;
    } else {
      batches_.push_back(Batch{cmd_index, g.pipeline, first, 3 * n});
    }
    if (g.pipeline == kOpaque) {
      stats_.opaque_triangles += n;
      stats_.opaque_px += g.area;
    } else if (g.pipeline == kSolid) {
      stats_.solid_triangles += n;
      stats_.solid_px += g.area;
    } else {
      stats_.textured_triangles += n;
      stats_.textured_px += g.area;
    }
    g.triangles = first;  // now the write cursor
    first += 3 * n;
  }
  for (unsigned t = 0; t < tris; ++t) {
    unsigned& at = groups_[group_of_[t]].triangles;
    std::copy_n(idx + 3 * t, 3, out.data() + at);
    at += 3;
  }
}

void GlRenderer::render(const ImDrawData* draw_data) {
  stats_ = {};
  const int fb_width = static_cast<int>(draw_data->DisplaySize.x * draw_data->FramebufferScale.x);
  const int fb_height = static_cast<int>(draw_data->DisplaySize.y * draw_data->FramebufferScale.y);
  if (fb_width <= 0 || fb_height <= 0 || api_ == nullptr) return;
  const Api& gl = *api_;
  setup_state(draw_data, fb_width, fb_height);

  const ImVec2 clip_off = draw_data->DisplayPos;
  const ImVec2 clip_scale = draw_data->FramebufferScale;
  const ImVec2 white = ImGui::GetIO().Fonts->TexUvWhitePixel;
  constexpr GLenum kIndexType = sizeof(ImDrawIdx) == 2 ? GL_UNSIGNED_SHORT : GL_UNSIGNED_INT;
  std::vector<ImDrawIdx>& indices = scratch<ImDrawIdx>(indices16_, indices32_);
  for (int n = 0; n < draw_data->CmdListsCount; ++n) {
    const ImDrawList* list = draw_data->CmdLists[n];
    batches_.clear();
    indices.resize(static_cast<std::size_t>(list->IdxBuffer.Size));
    for (int c = 0; c < list->CmdBuffer.Size; ++c) {
      if (list->CmdBuffer[c].UserCallback == nullptr) regroup(*list, c, white.x, white.y);
    }
    // A fresh buffer each list (orphaning): the driver need not wait for earlier draws.
    gl.buffer_data(GL_ARRAY_BUFFER,
                   static_cast<GLsizeiptr>(list->VtxBuffer.Size) * sizeof(ImDrawVert),
                   list->VtxBuffer.Data, GL_STREAM_DRAW);
    gl.buffer_data(GL_ELEMENT_ARRAY_BUFFER,
                   static_cast<GLsizeiptr>(indices.size()) * sizeof(ImDrawIdx), indices.data(),
                   GL_STREAM_DRAW);
    std::size_t b = 0;  // batches_ are in command order
    for (int c = 0; c < list->CmdBuffer.Size; ++c) {
      const ImDrawCmd& cmd = list->CmdBuffer[c];
      if (cmd.UserCallback != nullptr) {
        if (cmd.UserCallback == ImDrawCallback_ResetRenderState) {
          setup_state(draw_data, fb_width, fb_height);
        } else {
          cmd.UserCallback(list, &cmd);
        }
        continue;
      }
      const std::size_t b_end = [&] {
        std::size_t e = b;
        while (e < batches_.size() && batches_[e].cmd == c) ++e;
        return e;
      }();
      // Scissor exactly as the stock backend: clip rectangle in framebuffer pixels, y up.
      const ImVec2 clip_min((cmd.ClipRect.x - clip_off.x) * clip_scale.x,
                            (cmd.ClipRect.y - clip_off.y) * clip_scale.y);
      const ImVec2 clip_max((cmd.ClipRect.z - clip_off.x) * clip_scale.x,
                            (cmd.ClipRect.w - clip_off.y) * clip_scale.y);
      if (clip_max.x <= clip_min.x || clip_max.y <= clip_min.y) {
        b = b_end;
        continue;
      }
      glScissor(static_cast<int>(clip_min.x), static_cast<int>(fb_height - clip_max.y),
                static_cast<int>(clip_max.x - clip_min.x),
                static_cast<int>(clip_max.y - clip_min.y));
      glBindTexture(GL_TEXTURE_2D,
                    static_cast<GLuint>(reinterpret_cast<std::intptr_t>(cmd.GetTexID())));
      for (; b < b_end; ++b) {
        const Batch& batch = batches_[b];
        use(batch.pipeline);
        gl.draw_elements_base_vertex(
            GL_TRIANGLES, static_cast<GLsizei>(batch.count), kIndexType,
            reinterpret_cast<const void*>(std::size_t{batch.first} * sizeof(ImDrawIdx)),
            static_cast<GLint>(cmd.VtxOffset));
        ++stats_.draw_calls;
      }
    }
  }
  glDisable(GL_SCISSOR_TEST);  // glClear of the next frame covers the whole framebuffer
  glEnable(GL_BLEND);
  gl.bind_vertex_array(0);
}

}  // namespace csim::gui
