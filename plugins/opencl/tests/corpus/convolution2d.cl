// 2-D convolution of a single-channel float image with a square filter held in constant memory.
// Pixels outside the image are clamped to the nearest edge pixel (as CLK_ADDRESS_CLAMP_TO_EDGE would).
kernel
void convolution(global float* imageIn,
                 global float* imageOut,
                 constant float* filter,
                 int rows,
                 int cols,
                 int filterWidth)
{
   /* Store each work-item's unique row and column */
   int column = get_global_id(0);
   int row    = get_global_id(1);

   if (column >= cols || row >= rows) return;

   /* Half the width of the filter is needed for indexing memory later */
   int halfWidth = (int)(filterWidth/2);

   /* All accesses to images return data as four-element vector
    * (i.e., float4), although only the 'x' component is used here */
   float sum = 0.0f;

   /* Iterator for the filter */
   int filterIdx = 0;

   /* Iterate the filter rows */
   for(int i = -halfWidth; i <= halfWidth; i++) {
      int r = clamp(row + i, 0, rows - 1);
      /* Iterate over the filter columns */
      for(int j = -halfWidth; j <= halfWidth; j++) {
         int c = clamp(column + j, 0, cols - 1);
         sum += imageIn[r * cols + c] * filter[filterIdx++];
      }
   }

   /* Copy the data to the output image */
   imageOut[row * cols + column] = sum;
}
