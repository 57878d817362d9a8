// PyTorch .bin checkpoints as hostile input: the zip reader, the restricted unpickler and the
// state-dict reader together (TorchCheckpoint::parse on the input bytes), with every tensor view
// read along its strides' extremes (ASan checks they lie inside the input); and the input as a
// bare pickle stream run by the unpickler under the state-dict policy.
#include <cstdint>
#include <span>

#include "fuzz_input.h"
#include "loader/restricted_unpickler.h"
#include "loader/torch_checkpoint.h"
#include "loader/zip_archive.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  if (auto archive = lm::ZipArchive::parse(bytes, "fuzz.zip"); archive.ok()) {
    for (const auto& entry : archive->entries()) {
      lm::fuzz::touch(entry.second.data(), entry.second.size());
    }
  }
  if (auto ckpt = lm::TorchCheckpoint::parse(bytes, "fuzz.bin"); ckpt.ok()) {
    for (const lm::TorchTensor& t : ckpt->tensors()) {
      if (t.num_elements() == 0) continue;
      const int64_t element_bytes = lm::torch_dtype_info(t.dtype).element_bytes;
      // The first and the last element the view reads.
      int64_t last = 0;
      for (size_t k = 0; k < t.shape.size(); ++k) last += (t.shape[k] - 1) * t.strides[k];
      lm::fuzz::touch(t.first_element(), static_cast<size_t>(element_bytes));
      lm::fuzz::touch(t.first_element() + last * element_bytes, static_cast<size_t>(element_bytes));
    }
  }
  (void)lm::unpickle(bytes, lm::torch_state_dict_policy());
  return 0;
}
