// simview's renderer for Dear ImGui's draw data: OpenGL 3.3 core, tuned for software rasterisers
// (docs/simview.md, "Scale").
//
// Dear ImGui's stock OpenGL3 backend runs one pipeline for everything: vertex colour times a
// bilinear sample of the font atlas (solid shapes point at the atlas' white pixel), blended. On
// Mesa's llvmpipe every covered pixel then pays for the texture fetch and a read-modify-write of
// the framebuffer, whether it belongs to a glyph or to an opaque rectangle. GlRenderer sorts the
// triangles of each draw command by what they need:
//   opaque    every vertex on the white pixel with alpha 255: no texture, no blending
//   solid     every vertex on the white pixel, some alpha below 255: no texture, blended
//   textured  anything else (text, anti-aliased lines, user textures): the stock pipeline
// The pixels are the stock backend's: the white texel samples to exactly 1.0, so colour x white
// = colour, and blending an alpha-1 colour with (SRC_ALPHA, ONE_MINUS_SRC_ALPHA; ONE,
// ONE_MINUS_SRC_ALPHA) writes that colour and alpha 1, as the unblended write does. Triangles
// change order only past triangles they do not touch (GlRenderer::regroup), so every pixel sees
// the same sequence of writes. Vertex stage, scissor rectangles and vertex/index offsets are the
// stock backend's.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

struct ImDrawData;
struct ImDrawList;

namespace csim::gui {

// What the last frame sent to OpenGL (bench/bench_gui prints it).
struct GlRenderStats {
  std::size_t draw_calls = 0;          // glDrawElementsBaseVertex calls
  std::size_t state_changes = 0;       // switches between the three pipelines
  std::size_t opaque_triangles = 0;    // drawn without texture or blending
  std::size_t solid_triangles = 0;     // drawn without texture, blended
  std::size_t textured_triangles = 0;  // drawn with the font texture (or a user texture), blended
  double opaque_px = 0, solid_px = 0, textured_px = 0;  // their area, before clipping
};

class GlRenderer {
 public:
  using GlProc = void (*)();
  using GlLoader = GlProc (*)(const char*);  // e.g. glfwGetProcAddress
  struct Api;                                // OpenGL entry points (gl_renderer.cpp)

  GlRenderer();
  GlRenderer(const GlRenderer&) = delete;
  GlRenderer& operator=(const GlRenderer&) = delete;
  ~GlRenderer();

  // Needs a current OpenGL 3.3 core context and a Dear ImGui context whose fonts are final:
  // loads the entry points, compiles the shaders, uploads the font atlas and registers itself as
  // Dear ImGui's renderer backend. False, with `error` set, when something is missing.
  bool init(GlLoader loader, std::string* error);
  void shutdown();  // releases GL objects; the context must still be current

  // Draws into the bound framebuffer, whose size is DisplaySize x FramebufferScale.
  void render(const ImDrawData* draw_data);
  const GlRenderStats& stats() const { return stats_; }

 private:
  // The three pipelines, from the cheapest per pixel to the most general.
  enum Pipeline : unsigned char { kOpaque, kSolid, kTextured, kNone };
  struct Group {  // triangles of one draw command drawn together, in their original order
    Pipeline pipeline = kNone;
    float x0 = 0, y0 = 0, x1 = 0, y1 = 0;  // bounding box of its triangles, px (with a margin)
    unsigned triangles = 0;                // count, then the write cursor while regrouping
    double area = 0;                       // of its triangles, px^2
  };
  struct Batch {  // one draw call
    int cmd = 0;  // index in the draw list's CmdBuffer
    Pipeline pipeline = kNone;
    unsigned first = 0;  // first index in the list's (regrouped) index buffer
    unsigned count = 0;  // indices
  };
  void setup_state(const ImDrawData* draw_data, int fb_width, int fb_height);
  void use(Pipeline p);
  void regroup(const ImDrawList& list, int cmd, float white_u, float white_v);

  std::unique_ptr<Api> api_;  // GL entry points of the current context (null: not initialised)
  unsigned solid_program_ = 0, textured_program_ = 0;
  int solid_proj_ = -1, textured_proj_ = -1, textured_tex_ = -1;  // uniform locations
  unsigned vao_ = 0, vbo_ = 0, ibo_ = 0, font_texture_ = 0;
  Pipeline current_ = kNone;
  // Scratch space, kept between frames.
  std::vector<unsigned short> indices16_;  // the draw list's indices, regrouped (16-bit ImDrawIdx)
  std::vector<unsigned> indices32_;        // the same for 32-bit ImDrawIdx
  std::vector<unsigned> group_of_;         // per triangle of the command being regrouped
  std::vector<Group> groups_;
  std::vector<Batch> batches_;
  GlRenderStats stats_;
};

}  // namespace csim::gui
